// The README's client example ("Exactly-once effects"); tsc checks it against the generated types.
import { createClient, collect, SchedulerApiError } from "scheduler/client";

const scheduler = createClient({ baseUrl: "https://scheduler.example.com", token: process.env.SCHEDULER_TOKEN });
const job = await scheduler.jobs.create({
  target: { url: "https://receiver.example.com/hook", body: { amount: 42 } },
  delay: "30s",
  verify: { url: "https://receiver.example.com/hook" },
});
const dead = await collect(scheduler.dlq.iterate(), 100); // every page, up to 100 items
console.log(job.id, job.status, dead.length);
try {
  await scheduler.jobs.get("not-a-job");
} catch (err) {
  if (err instanceof SchedulerApiError) console.log(err.status, err.code, err.path);
}
