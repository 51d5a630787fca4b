import type { SigningKeyring } from "./signing-keyring.ts";
import type { Db } from "../store/db.ts";
import type { Logger } from "../obs/log.ts";
import type { Metrics } from "../obs/metrics.ts";
import { completeVerified, lastUnknownAttemptOf } from "../store/verify-queries.ts";
import { askVerify } from "./verify-call.ts";
import type { InFlight } from "./in-flight.ts";

export interface RetryVerifierDeps {
  db: Db;
  owner: string;
  log: Logger;
  metrics: Metrics;
  /** The signing keys of calls, in memory: the verify GET is signed with the same keys. */
  keyring?: SigningKeyring;
  allowPrivateTargets: boolean;
  /** Jobs to call after all (not processed, no answer, nothing in doubt): on to the pre-call check. */
  resume: (fs: InFlight[]) => Promise<void>;
  /** Jobs not called after all (cancelled, stopping, lease lost while asking): handed back. */
  giveBack: (fs: InFlight[]) => Promise<void>;
  /** A job ended here without a call (or no longer ours): its slot is free. */
  finished: (f: InFlight) => void;
  /** Runs a promise the worker waits for on stop. */
  background: (p: Promise<void>) => void;
}

/** At most this long for an answer (or the job's own timeout, when shorter). */
const VERIFY_TIMEOUT_MS = 10_000;

/**
 * Verify before retry (README "Verify before retry"). A job that names a verify URL and that has a call whose
 * outcome is unknown (possibly_delivered: a timeout, a connection lost after send, a lost
 * worker; the latest such call, even if calls refused while the target restarted came after
 * it) is not called again at once: its verify URL is asked first, under the job's lease, outside any
 * transaction. "Processed" ends the job succeeded without a second call; anything else sends
 * it on to its call as if nothing had been asked. Async jobs are left out: their target
 * finishes them through the callback, and "processed" would not say the work is done.
 */
export class RetryVerifier {
  /** Jobs already asked about under this claim: the second pass through the pre-call path goes straight on. */
  private readonly asked = new WeakSet<InFlight>();

  constructor(private readonly d: RetryVerifierDeps) {}

  /**
   * Takes out the jobs to ask about first and returns the others, to be called now. Without
   * a verify URL in the batch this reads one field per job and allocates nothing.
   */
  divert(ready: InFlight[]): InFlight[] {
    let rest: InFlight[] | undefined;
    for (let i = 0; i < ready.length; i++) {
      const f = ready[i];
      if (!f.job.verify_url || f.job.calls === 0 || f.job.async || this.asked.has(f)) {
        rest?.push(f);
        continue;
      }
      rest ??= ready.slice(0, i);
      this.asked.add(f);
      this.d.background(this.check(f));
    }
    return rest ?? ready;
  }

  private async check(f: InFlight): Promise<void> {
    const { job } = f;
    const log = this.d.log.child({ job_id: job.id });
    let next: "call" | "done" = "call";
    try {
      const last = await lastUnknownAttemptOf(this.d.db, job.id);
      if (!last) return;
      const answer = await askVerify(job, job.verify_url!, {
        signingKeys: this.d.keyring?.keysFor(job.tenant, job.schedule_id),
        allowPrivateTargets: this.d.allowPrivateTargets,
        timeoutMs: Math.min(VERIFY_TIMEOUT_MS, job.timeout_ms),
        signal: f.abort.signal,
      });
      this.d.metrics.verifyChecks.inc({ result: answer.result });
      if (answer.result !== "processed") {
        log.info({ attempt_id: last.id, verify: answer.result, detail: answer.detail }, "verify before retry: not confirmed processed; calling again");
        return;
      }
      next = "done";
      if (await completeVerified(this.d.db, { owner: this.d.owner, jobId: job.id, gen: f.gen, attemptId: last.id })) {
        this.d.metrics.verifyAvoidedCalls.inc();
        log.info({ attempt_id: last.id, attempt: last.number }, "verify before retry: the target processed the call; succeeded without calling again");
      } else {
        log.info({ attempt_id: last.id }, "verify before retry: processed, but the job is no longer ours (lease moved on); left to its new owner");
      }
    } catch (err) {
      // A database error here: nothing was decided; the call goes ahead as it would have.
      log.warn({ err }, "verify before retry failed; calling again as usual");
      next = "call";
    } finally {
      if (next === "done") this.d.finished(f);
      else if (f.abort.signal.aborted) await this.d.giveBack([f]);
      else await this.d.resume([f]);
    }
  }
}
