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
declare module "*.tar.gz" {
  const path: string;
  export default path;
}
declare module "*.data" {
  const path: string;
  export default path;
}
// The dashboard's files (src/api/ui/), served as they are: the browser runs them unbuilt.
// (*.html is typed by bun-types as an HTML bundle; src/api/ui-routes.ts says what it is.)
declare module "*.css" {
  const text: string;
  export default text;
}
// Only the dashboard's scripts: any other .js import keeps its real types.
declare module "./ui/*.js" {
  const text: string;
  export default text;
}
