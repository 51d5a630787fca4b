// The one place Temporal comes from. Bun has a native global Temporal whose objects do not
// mix with the polyfill's (TypeError), so every module imports it from here.
export { Temporal } from "@js-temporal/polyfill";
