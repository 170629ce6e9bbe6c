-- Version 5: a deleted episode row leaves a tombstone, and TRUNCATE is refused. Before, a row
-- deleted by hand (an approved 2026-W32-1) left its key without a holder: the key's retry was handed
-- a new sequence (a second job, maybe a second payment) and `check` saw nothing.
-- * A DELETE writes one tombstone per row (its id, week, sequence, key, who and when, and its last
--   record whole, so that the row can be restored from it): the retry of that key, in any week, is
--   refused (IJ010, DETAIL {"episode_id": ..., "deleted_at": ..., "deleted_by": ...}), and the
--   week's next sequence counts tombstones too (the weeks row may be gone with the episode's).
-- * TRUNCATE, which fires no row trigger, is refused (IJ011).
-- * These triggers and the guards of versions 1-3 fire in every replication role (ENABLE ALWAYS):
--   `session_replication_role = replica` turns ordinary triggers off, not these. Only the table's
--   owner can disable them (ALTER TABLE ... DISABLE TRIGGER); a row deleted then has no tombstone,
--   and `check` still names every sequence up to the week's high-water mark that has no row.
-- Nothing is added to a retry's path, nor a write to a new allocation's: it reads the key's and the
-- week's tombstones in the statement that reads the mark (two probes of a table that is empty unless
-- someone deleted rows by hand; measured +3-5% allocation p50, docs/design.md).
-- Deleting a tombstone is how an operator says "this key may have a new episode".

CREATE TABLE {schema}.episode_tombstones (
    namespace      text        NOT NULL,
    episode_id     text        NOT NULL,
    week_id        text        NOT NULL,
    sequence       integer     NOT NULL,
    allocation_key text        NOT NULL,
    record         jsonb       NOT NULL,
    deleted_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
    deleted_by     text        NOT NULL DEFAULT session_user,
    CONSTRAINT episode_tombstones_pkey PRIMARY KEY (namespace, episode_id)
);
CREATE INDEX episode_tombstones_key_idx ON {schema}.episode_tombstones (namespace, allocation_key);
CREATE INDEX episode_tombstones_week_idx ON {schema}.episode_tombstones (namespace, week_id, sequence);

-- One statement's deleted rows at once (a transition table); a row restored and deleted again
-- replaces its tombstone.
CREATE FUNCTION {schema}.episodes_tombstone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.episode_tombstones AS t (namespace, episode_id, week_id, sequence, allocation_key, record)
    SELECT g.namespace, g.episode_id, g.week_id, g.sequence, g.allocation_key, pg_catalog.to_jsonb(g) FROM gone g
    ON CONFLICT (namespace, episode_id) DO UPDATE SET week_id = excluded.week_id, sequence = excluded.sequence,
        allocation_key = excluded.allocation_key, record = excluded.record,
        deleted_at = excluded.deleted_at, deleted_by = excluded.deleted_by;
    RETURN NULL;
END
$$;

CREATE TRIGGER episodes_tombstone AFTER DELETE ON {schema}.episodes
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION {schema}.episodes_tombstone();

CREATE FUNCTION {schema}.episodes_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'TRUNCATE would forget which keys %.episodes allocated: DELETE its rows (each leaves a tombstone)',
        TG_TABLE_SCHEMA USING ERRCODE = 'IJ011',
        HINT = 'DROP SCHEMA ... CASCADE drops the whole store';
END
$$;

CREATE TRIGGER episodes_refuse_truncate BEFORE TRUNCATE ON {schema}.episodes
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.episodes_refuse_truncate();

ALTER TABLE {schema}.episodes ENABLE ALWAYS TRIGGER episodes_tombstone;
ALTER TABLE {schema}.episodes ENABLE ALWAYS TRIGGER episodes_refuse_truncate;
ALTER TABLE {schema}.episodes ENABLE ALWAYS TRIGGER episodes_guard_update;
ALTER TABLE {schema}.episodes ENABLE ALWAYS TRIGGER episodes_guard_approval;
ALTER TABLE {schema}.store_identity ENABLE ALWAYS TRIGGER store_identity_guard;

-- The function of version 4, with the tombstones: refused by key when no row holds it, counted by week.
CREATE OR REPLACE FUNCTION {schema}.allocate_episode(
    p_namespace      text,
    p_lock_key       bigint,
    p_lock_ms        text,
    p_week_id        text,
    p_key            text,
    p_fingerprint    text,
    p_now            text,
    p_submission     jsonb,
    p_metadata       jsonb,
    p_schema_version integer,
    p_new_identity   text,
    OUT outcome          text,
    OUT identity         text,
    OUT sequence         integer,
    OUT episode_id       text,
    OUT week_id          text,
    OUT allocation_key   text,
    OUT fingerprint      text,
    OUT status           text,
    OUT created_at       text,
    OUT updated_at       text,
    OUT submission_state text,
    OUT submission       text,
    OUT metadata         text,
    OUT schema_version   integer,
    OUT approval         text
) LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    holder_ids  text[];
    held        {schema}.episodes%ROWTYPE;
    found_row   {schema}.episodes%ROWTYPE;
    highest     integer;
    gone        text;
    next_seq    bigint;
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'allocate_episode must run under READ COMMITTED, not %',
            pg_catalog.current_setting('transaction_isolation') USING ERRCODE = 'IJ009';
    END IF;
    -- Two passes over the same rule: first without the lock (a retry that finds its own episode
    -- needs none: a committed holder's week, key and fingerprint never change, trigger IJ002),
    -- then under it, where the holders are read again (a writer may have committed the key
    -- meanwhile). Anything but that one answer is decided under the lock.
    FOR locked IN 0..1 LOOP
        IF locked = 1 THEN
            PERFORM pg_catalog.set_config('lock_timeout', p_lock_ms, true);
            PERFORM pg_catalog.pg_advisory_xact_lock(p_lock_key);
        END IF;
        holder_ids := NULL;
        held := NULL;
        FOR found_row IN SELECT e.* FROM {schema}.episodes e
                   WHERE e.namespace = p_namespace AND e.allocation_key = p_key ORDER BY e.episode_id LOOP
            holder_ids := pg_catalog.array_append(holder_ids, found_row.episode_id);
            held := found_row;
        END LOOP;
        identity := NULL;
        IF p_new_identity IS NOT NULL THEN
            SELECT s.identity INTO identity FROM {schema}.store_identity s WHERE s.namespace = p_namespace;
        END IF;
        IF locked = 0 THEN
            EXIT WHEN pg_catalog.cardinality(holder_ids) = 1 AND held.week_id = p_week_id
                AND held.fingerprint IS NOT DISTINCT FROM p_fingerprint
                AND (p_new_identity IS NULL OR identity IS NOT NULL);
            CONTINUE;
        END IF;
        IF pg_catalog.cardinality(holder_ids) > 1 THEN
            RAISE EXCEPTION 'allocation key held by several episodes' USING ERRCODE = 'IJ005',
                DETAIL = pg_catalog.json_build_object('ids', holder_ids)::text;
        END IF;
        IF holder_ids IS NOT NULL AND held.week_id IS DISTINCT FROM p_week_id THEN
            RAISE EXCEPTION 'allocation key held in another week' USING ERRCODE = 'IJ006',
                DETAIL = pg_catalog.json_build_object('episode_id', held.episode_id, 'week_id', held.week_id)::text;
        END IF;
        IF holder_ids IS NOT NULL AND held.fingerprint IS DISTINCT FROM p_fingerprint THEN
            RAISE EXCEPTION 'allocation key held with another fingerprint' USING ERRCODE = 'IJ007',
                DETAIL = pg_catalog.json_build_object(
                    'episode_id', held.episode_id, 'fingerprint', held.fingerprint)::text;
        END IF;
    END LOOP;
    IF holder_ids IS NULL THEN
        -- A new key, unless its row was deleted: one statement reads the key's tombstone and the
        -- week's highest sequence (its mark, or a row or tombstone it somehow missed: whichever is higher).
        SELECT greatest(
            (SELECT w.highest_sequence FROM {schema}.weeks w WHERE w.namespace = p_namespace AND w.week_id = p_week_id),
            (SELECT pg_catalog.max(e.sequence) FROM {schema}.episodes e
             WHERE e.namespace = p_namespace AND e.week_id = p_week_id),
            (SELECT pg_catalog.max(t.sequence) FROM {schema}.episode_tombstones t
             WHERE t.namespace = p_namespace AND t.week_id = p_week_id)
        ), (
            SELECT pg_catalog.json_build_object(
                'episode_id', t.episode_id, 'deleted_at', t.deleted_at, 'deleted_by', t.deleted_by)::text
            FROM {schema}.episode_tombstones t WHERE t.namespace = p_namespace AND t.allocation_key = p_key
            ORDER BY t.deleted_at DESC, t.episode_id LIMIT 1
        ) INTO highest, gone;
        IF gone IS NOT NULL THEN
            RAISE EXCEPTION 'allocation key''s episode row was deleted' USING ERRCODE = 'IJ010', DETAIL = gone;
        END IF;
    END IF;
    IF p_new_identity IS NOT NULL AND identity IS NULL THEN  -- the namespace's first write records it
        INSERT INTO {schema}.store_identity (namespace, identity) VALUES (p_namespace, p_new_identity);
        identity := p_new_identity;
    END IF;
    IF holder_ids IS NOT NULL THEN
        outcome := 'reused';
        sequence := held.sequence; episode_id := held.episode_id; week_id := held.week_id;
        allocation_key := held.allocation_key; fingerprint := held.fingerprint; status := held.status;
        created_at := held.created_at; updated_at := held.updated_at;
        submission_state := held.submission_state::text; submission := held.submission::text;
        metadata := held.metadata::text; schema_version := held.schema_version; approval := held.approval::text;
        RETURN;
    END IF;
    next_seq := CASE WHEN highest IS NULL THEN 0 ELSE highest::bigint + 1 END;
    IF next_seq > 999999999 THEN
        RAISE EXCEPTION 'week % cannot follow its highest sequence %', p_week_id, highest USING ERRCODE = 'IJ008',
            DETAIL = pg_catalog.json_build_object('highest', highest)::text;
    END IF;
    INSERT INTO {schema}.weeks AS w (namespace, week_id, highest_sequence)
    VALUES (p_namespace, p_week_id, next_seq)
    ON CONFLICT (namespace, week_id) DO UPDATE SET highest_sequence = greatest(
        w.highest_sequence, excluded.highest_sequence);
    INSERT INTO {schema}.episodes (
        namespace, episode_id, week_id, sequence, allocation_key, fingerprint, status, created_at, updated_at,
        submission_state, submission, metadata, schema_version
    ) VALUES (
        p_namespace, p_week_id || '-' || next_seq::text, p_week_id, next_seq, p_key, p_fingerprint, 'allocated',
        p_now, p_now, (p_submission ->> 'state')::{schema}.submission_state, p_submission, p_metadata,
        p_schema_version
    );
    outcome := 'new';
    sequence := next_seq;
END
$$;
