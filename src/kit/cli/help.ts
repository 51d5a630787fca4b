// Help for the resource commands (scheduler jobs|schedules|dlq), each with examples.

const COMMON = `Options for every command:
  --url=URL        the scheduler's API (default: SCHEDULER_URL, else http://127.0.0.1:$PORT or :8080)
  --token=T        bearer token (default: SCHEDULER_TOKEN)
  -o json|table    output (default: table)
`;

export const HELP: Record<string, string> = {
  jobs: `Usage:
  scheduler jobs create --target=URL [--method=POST] [--body=JSON | --body-text=TEXT] [--header=K:V]…
                        [--delay=30s | --run-at=INSTANT] [--key=IDEMPOTENCY_KEY] [--verify-url=URL]
                        [--max-attempts=N] [--timeout=30s] [--tenant=T]
  scheduler jobs create -f job.json          the request body of POST /v1/jobs, from a file (- for stdin)
  scheduler jobs get ID                      one job with its attempt log
  scheduler jobs list [--status=S] [--schedule=ID] [--limit=N] [--all]
  scheduler jobs cancel ID [--reason=TEXT]

Examples:
  scheduler jobs create --target=https://example.com/hook --body='{"invoice":42}' --delay=30s --key=invoice-42
  scheduler jobs create --target=https://example.com/hook --verify-url=https://example.com/hook/verify -o json
  scheduler jobs list --status=dead --limit=20
  scheduler jobs list --all -o json > jobs.json
  scheduler jobs get 0192b7c5-…
  scheduler jobs cancel 0192b7c5-… --reason="customer asked"

${COMMON}`,
  schedules: `Usage:
  scheduler schedules create --id=ID --cron=EXPR [--timezone=ZONE] --target=URL [--body=JSON] [--method=POST]
                             [--verify-url=URL] [--overlap=allow|skip|queue] [--misfire=skip|fire_once|fire_all] [--paused]
  scheduler schedules create -f schedule.json   the request body of POST /v1/schedules (- for stdin)
  scheduler schedules list [--all]
  scheduler schedules pause ID [--reason=TEXT]
  scheduler schedules resume ID [--reason=TEXT]
  scheduler schedules preview ID [--count=N]    the next N fire instants (default 10), with UTC offsets

Examples:
  scheduler schedules create --id=daily-report --cron="0 9 * * 1-5" --timezone=America/New_York --target=https://example.com/report
  scheduler schedules preview daily-report --count=5
  scheduler schedules pause daily-report --reason="holiday freeze"
  scheduler schedules list -o json

${COMMON}`,
  dlq: `Usage:
  scheduler dlq list [--limit=N] [--all]
  scheduler dlq replay ID --reason=TEXT [--force]   (admin) same job id, a new attempt

Examples:
  scheduler dlq list
  scheduler dlq replay 0192b7c5-… --reason="target fixed"

${COMMON}`,
};

export const RESOURCES = Object.keys(HELP);
