// Migrations are imported as text so the compiled binary carries them.
import m001 from "../../sql/migrations/001_jobs.sql" with { type: "text" };
import m002 from "../../sql/migrations/002_schedules.sql" with { type: "text" };
import m003 from "../../sql/migrations/003_index_outbox.sql" with { type: "text" };
import m004 from "../../sql/migrations/004_index_capture.sql" with { type: "text" };
import m005 from "../../sql/migrations/005_region_authority.sql" with { type: "text" };
import m006 from "../../sql/migrations/006_fair_dispatch.sql" with { type: "text" };
import m007 from "../../sql/migrations/007_host_limits.sql" with { type: "text" };
import m008 from "../../sql/migrations/008_queue_order.sql" with { type: "text" };
import m012 from "../../sql/migrations/012_stats.sql" with { type: "text" };
import m013 from "../../sql/migrations/013_shards.sql" with { type: "text" };
import m010 from "../../sql/migrations/010_async_jobs.sql" with { type: "text" };
import m011 from "../../sql/migrations/011_payloads_retention.sql" with { type: "text" };
import m009 from "../../sql/migrations/009_dlq.sql" with { type: "text" };
import m014 from "../../sql/migrations/014_late_outcome.sql" with { type: "text" };
import m015 from "../../sql/migrations/015_fencing_terms.sql" with { type: "text" };
import m016 from "../../sql/migrations/016_delivery_path_indexes.sql" with { type: "text" };
import m019 from "../../sql/migrations/019_capture_inserts_per_statement.sql" with { type: "text" };
import m022 from "../../sql/migrations/022_signing_keys.sql" with { type: "text" };
import m024 from "../../sql/migrations/024_verify_before_retry.sql" with { type: "text" };
import m025 from "../../sql/migrations/025_claimable.sql" with { type: "text" };
import m026 from "../../sql/migrations/026_attempts_without_fk.sql" with { type: "text" };
import m027 from "../../sql/migrations/027_attempts_hot.sql" with { type: "text" };
import m028 from "../../sql/migrations/028_job_tenants.sql" with { type: "text" };
import m029 from "../../sql/migrations/029_release_flag.sql" with { type: "text" };
import m030 from "../../sql/migrations/030_tenant_schedules.sql" with { type: "text" };
import m031 from "../../sql/migrations/031_occurrence_lead.sql" with { type: "text" };
import m032 from "../../sql/migrations/032_tenant_guards_after.sql" with { type: "text" };
import m033 from "../../sql/migrations/033_jobs_fillfactor.sql" with { type: "text" };

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: Migration[] = [
  { version: 1, name: "001_jobs", sql: m001 },
  { version: 2, name: "002_schedules", sql: m002 },
  { version: 3, name: "003_index_outbox", sql: m003 },
  { version: 4, name: "004_index_capture", sql: m004 },
  { version: 5, name: "005_region_authority", sql: m005 },
  { version: 6, name: "006_fair_dispatch", sql: m006 },
  { version: 7, name: "007_host_limits", sql: m007 },
  { version: 8, name: "008_queue_order", sql: m008 },
  { version: 9, name: "009_dlq", sql: m009 },
  { version: 10, name: "010_async_jobs", sql: m010 },
  { version: 11, name: "011_payloads_retention", sql: m011 },
  { version: 12, name: "012_stats", sql: m012 },
  { version: 13, name: "013_shards", sql: m013 },
  { version: 14, name: "014_late_outcome", sql: m014 },
  { version: 15, name: "015_fencing_terms", sql: m015 },
  { version: 16, name: "016_delivery_path_indexes", sql: m016 },
  { version: 19, name: "019_capture_inserts_per_statement", sql: m019 },
  { version: 22, name: "022_signing_keys", sql: m022 },
  { version: 24, name: "024_verify_before_retry", sql: m024 },
  { version: 25, name: "025_claimable", sql: m025 },
  { version: 26, name: "026_attempts_without_fk", sql: m026 },
  { version: 27, name: "027_attempts_hot", sql: m027 },
  { version: 28, name: "028_job_tenants", sql: m028 },
  { version: 29, name: "029_release_flag", sql: m029 },
  { version: 30, name: "030_tenant_schedules", sql: m030 },
  { version: 31, name: "031_occurrence_lead", sql: m031 },
  { version: 32, name: "032_tenant_guards_after", sql: m032 },
  { version: 33, name: "033_jobs_fillfactor", sql: m033 },
];
