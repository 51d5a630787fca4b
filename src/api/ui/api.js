// The JSON API as users call it, with the token pasted into the page.

const KEY = "scheduler.token";

export const token = {
  get: () => localStorage.getItem(KEY) ?? "",
  set: (t) => (t ? localStorage.setItem(KEY, t) : localStorage.removeItem(KEY)),
};

/** An API error answer, with the server's own message (`{ error: { code, message } }`). */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
  get auth() {
    return this.status === 401 || this.status === 403;
  }
  toString() {
    return `${this.status} ${this.code}: ${this.message}`;
  }
}

export async function call(method, path, body) {
  const headers = { accept: "application/json" };
  const t = token.get();
  // Without SCHEDULER_TOKENS the API serves loopback clients with no token at all.
  if (t) headers.authorization = `Bearer ${t}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  let res;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(0, "unreachable", `cannot reach the scheduler (${err.message})`);
  }
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const e = json?.error;
    throw new ApiError(res.status, e?.code ?? "error", e?.message ?? (text.slice(0, 200) || res.statusText));
  }
  return json;
}
