/** A drill failure with a one-line message meant for the operator (no stack trace needed). */
export class DrillError extends Error {
  override readonly name = "DrillError";
}
