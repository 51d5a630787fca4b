/** Why a call was refused; `status` is what the receiver answers (the scheduler classifies it). */
export type ReceiverErrorCode =
  | "missing_headers" // 400: not a scheduler call (no webhook-id / timestamp / signature)
  | "timestamp_out_of_range" // 401: older or newer than the tolerance (a replay, or a skewed clock)
  | "invalid_signature" // 401: no signature matches any configured secret
  | "stale_fencing_token"; // 409: a higher fencing token was already seen for this job

const STATUS: Record<ReceiverErrorCode, number> = {
  missing_headers: 400,
  timestamp_out_of_range: 401,
  invalid_signature: 401,
  stale_fencing_token: 409,
};

export class ReceiverError extends Error {
  readonly status: number;
  constructor(
    readonly code: ReceiverErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "ReceiverError";
    this.status = STATUS[code];
  }

  /** The scheduler's error shape: { "error": { "code", "message" } }. */
  toJSON() {
    return { error: { code: this.code, message: this.message } };
  }
}
