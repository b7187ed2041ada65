"""Keep corpora_taskcount exact with statement-level triggers over transition tables: one grouped
upsert per statement, whatever the number of rows it touched."""

from django.db import migrations

BUCKET = """
CREATE OR REPLACE FUNCTION ccs_status_bucket(status integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN status > 0 THEN 1 WHEN status <= -6 THEN -6 ELSE status END
$$;
"""

APPLY = """
CREATE OR REPLACE FUNCTION ccs_taskcount_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    INSERT INTO corpora_taskcount (corpus_id, service_id, bucket, count)
      SELECT corpus_id, service_id, ccs_status_bucket(status), -count(*)
        FROM old_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (corpus_id, service_id, bucket) DO UPDATE SET count = corpora_taskcount.count + EXCLUDED.count;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO corpora_taskcount (corpus_id, service_id, bucket, count)
      SELECT corpus_id, service_id, ccs_status_bucket(status), count(*)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (corpus_id, service_id, bucket) DO UPDATE SET count = corpora_taskcount.count + EXCLUDED.count;
  END IF;
  RETURN NULL;
END
$$;
"""

TRIGGERS = """
CREATE TRIGGER task_count_insert AFTER INSERT ON corpora_task
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ccs_taskcount_apply();
CREATE TRIGGER task_count_update AFTER UPDATE ON corpora_task
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ccs_taskcount_apply();
CREATE TRIGGER task_count_delete AFTER DELETE ON corpora_task
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ccs_taskcount_apply();
"""

DROP = """
DROP TRIGGER IF EXISTS task_count_insert ON corpora_task;
DROP TRIGGER IF EXISTS task_count_update ON corpora_task;
DROP TRIGGER IF EXISTS task_count_delete ON corpora_task;
DROP FUNCTION IF EXISTS ccs_taskcount_apply();
DROP FUNCTION IF EXISTS ccs_status_bucket(integer);
"""


class Migration(migrations.Migration):
    dependencies = [("corpora", "0001_initial")]
    operations = [migrations.RunSQL(BUCKET + APPLY + TRIGGERS, DROP)]
