/** Why a call was aborted from our side; a stop or a lost lease is not the target's fault. */
export const ABORT_STOP = "the worker is stopping";
export const ABORT_LEASE = "the lease was lost";
export const ABORT_CANCEL = "cancel requested";
