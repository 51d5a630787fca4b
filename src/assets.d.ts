// Files imported with `with { type: "text" | "file" }`: text gives the contents, file a path
// (inside the compiled binary, a path in its embedded file system).
declare module "*.sql" {
  const text: string;
  export default text;
}
declare module "*.wasm" {
  const path: string;
  export default path;
}
declare module "*.data" {
  const path: string;
  export default path;
}
