import * as v from "valibot";
import { SigningKeyCreateSchema, SigningKeyRetireSchema, SigningKeyRotateSchema } from "../signing-keys-routes.ts";
import { errors, json, WRITE_ERRORS, type RouteDoc } from "./route-doc.ts";
import { SigningKeyView } from "./components.ts";

const KEY_ID = { id: "The signing key's id (UUIDv7)." };
const SECRET = v.pipe(v.string(), v.description("`whsec_` + base64 of 32 random bytes. Shown in this answer only: store it now."));
const HOW =
  "A call is signed with the active keys of its job's schedule if it has any, else its tenant's, else SCHEDULER_SIGNING_SECRET if set; several active keys give one `v1,` signature each in `webhook-signature`, space separated (Standard Webhooks rotation). Workers hold keys in memory and reload them on change (NOTIFY), at the latest after SCHEDULER_SIGNING_KEYS_REFRESH (10 s by default).";

/** Signing keys per tenant and schedule (README "Signing keys per tenant"). */
export const signingKeysDocs: RouteDoc[] = [
  {
    method: "post",
    path: "/v1/signing-keys",
    tag: "Signing keys",
    auth: "admin",
    summary: "Create a signing key for a tenant or one of its schedules (the secret is shown once; audited)",
    description: `${HOW} At most 10 active keys per tenant and per schedule (409 \`too_many_signing_keys\`). A \`schedule_id\` must name an existing schedule of the tenant (400).`,
    body: SigningKeyCreateSchema,
    bodyOptional: true,
    responses: { 201: json(v.object({ ...SigningKeyView.entries, secret: SECRET }), "The new key, with its secret."), ...errors(...WRITE_ERRORS) },
  },
  {
    method: "get",
    path: "/v1/signing-keys",
    tag: "Signing keys",
    auth: "admin",
    summary: "List signing keys, newest first (never their secrets)",
    query: v.object({
      status: v.optional(v.pipe(v.picklist(["active", "retired"]), v.description("Only keys in this state."))),
      schedule_id: v.optional(v.pipe(v.string(), v.description("Only the keys of this schedule."))),
      tenant: v.optional(v.pipe(v.string(), v.description("Only for an all-tenant token: limit to this tenant."))),
      limit: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000), v.description("At most this many (default 100)."))),
    }),
    responses: { 200: json("SigningKeyList", "The keys."), ...errors(400, 401, 403) },
  },
  {
    method: "post",
    path: "/v1/signing-keys/:id/rotate",
    tag: "Signing keys",
    auth: "admin",
    params: KEY_ID,
    summary: "Rotate: a new key in the same scope; the old one keeps signing for `overlap` (default 24h), then retires (audited)",
    description:
      "During the overlap every call carries both signatures, so receivers can move to the new secret at their pace. 409 `signing_key_retired` for a retired key.",
    body: SigningKeyRotateSchema,
    bodyOptional: true,
    responses: {
      201: json(
        v.object({ ...SigningKeyView.entries, secret: SECRET, old: SigningKeyView }),
        "The new key, with its secret, and the old one with its `retires_at`.",
      ),
      ...errors(...WRITE_ERRORS, 404),
    },
  },
  {
    method: "post",
    path: "/v1/signing-keys/:id/retire",
    tag: "Signing keys",
    auth: "admin",
    params: KEY_ID,
    summary: "Retire a key now: no call started after this is signed with it (audited; idempotent)",
    body: SigningKeyRetireSchema,
    bodyOptional: true,
    responses: { 200: json("SigningKey", "The key, status retired."), ...errors(...WRITE_ERRORS, 404) },
  },
];
