-- Version 4: the allocation rule inside the server, so that an allocation is one round trip and the
-- namespace's advisory lock is held only for the server's own work, never across the network.
-- It is the same rule as allocation.decide and PostgresSession (a test runs one table of cases
-- through both). Conflicts raise their own SQLSTATEs with the facts in DETAIL (JSON); the store
-- turns them into the very errors allocation.py gives:
--   IJ005 the key is held by several episodes      DETAIL {"ids": [...]}
--   IJ006 the key is held in another week          DETAIL {"episode_id": ..., "week_id": ...}
--   IJ007 the key is held with another fingerprint DETAIL {"episode_id": ..., "fingerprint": ...}
--   IJ008 the week's next sequence is past 999 999 999 (no episode id can follow)  DETAIL {"highest": n}
--   IJ009 called outside READ COMMITTED (a snapshot older than the lock would miss commits)
-- VOLATILE (the default), so each statement takes a fresh snapshot: the reads after the lock see
-- every commit made while this call waited for it.

CREATE FUNCTION {schema}.allocate_episode(
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
    p_new_identity   text
) RETURNS TABLE (
    outcome          text,
    identity         text,
    episode_id       text,
    week_id          text,
    sequence         integer,
    allocation_key   text,
    fingerprint      text,
    status           text,
    created_at       text,
    updated_at       text,
    submission_state text,
    submission       text,
    metadata         text,
    schema_version   integer,
    approval         text
) LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    holder_ids  text[];
    held        {schema}.episodes%ROWTYPE;
    found_row   {schema}.episodes%ROWTYPE;
    recorded    text;
    highest     integer;
    next_seq    bigint;
BEGIN
    IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'allocate_episode must run under READ COMMITTED, not %',
            pg_catalog.current_setting('transaction_isolation') USING ERRCODE = 'IJ009';
    END IF;
    -- Two passes over the same rule: first without the lock (a retry that finds its own episode
    -- needs none: a committed holder's week, key and fingerprint never change, trigger IJ002),
    -- then under it. Anything but that one answer is decided under the lock.
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
        recorded := NULL;
        IF p_new_identity IS NOT NULL THEN
            SELECT s.identity INTO recorded FROM {schema}.store_identity s WHERE s.namespace = p_namespace;
        END IF;
        IF locked = 0 THEN
            EXIT WHEN pg_catalog.cardinality(holder_ids) = 1 AND held.week_id = p_week_id
                AND held.fingerprint IS NOT DISTINCT FROM p_fingerprint
                AND (p_new_identity IS NULL OR recorded IS NOT NULL);
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
    IF p_new_identity IS NOT NULL AND recorded IS NULL THEN  -- the namespace's first write records it
        INSERT INTO {schema}.store_identity (namespace, identity) VALUES (p_namespace, p_new_identity);
        recorded := p_new_identity;
    END IF;
    IF holder_ids IS NOT NULL THEN
        RETURN QUERY SELECT 'reused', recorded, held.episode_id, held.week_id, held.sequence,
            held.allocation_key, held.fingerprint, held.status, held.created_at, held.updated_at,
            held.submission_state::text, held.submission::text, held.metadata::text, held.schema_version,
            held.approval::text;
        RETURN;
    END IF;
    -- The week's high-water mark, or a row it somehow missed: whichever is higher.
    SELECT greatest(
        (SELECT w.highest_sequence FROM {schema}.weeks w WHERE w.namespace = p_namespace AND w.week_id = p_week_id),
        (SELECT pg_catalog.max(e.sequence) FROM {schema}.episodes e
         WHERE e.namespace = p_namespace AND e.week_id = p_week_id)
    ) INTO highest;
    next_seq := CASE WHEN highest IS NULL THEN 0 ELSE highest::bigint + 1 END;
    IF next_seq > 999999999 THEN
        RAISE EXCEPTION 'week % cannot follow its highest sequence %', p_week_id, highest USING ERRCODE = 'IJ008',
            DETAIL = pg_catalog.json_build_object('highest', highest)::text;
    END IF;
    INSERT INTO {schema}.weeks AS w (namespace, week_id, highest_sequence)
    VALUES (p_namespace, p_week_id, next_seq)
    ON CONFLICT (namespace, week_id) DO UPDATE SET highest_sequence = greatest(
        w.highest_sequence, excluded.highest_sequence);
    RETURN QUERY INSERT INTO {schema}.episodes AS e (
        namespace, episode_id, week_id, sequence, allocation_key, fingerprint, status, created_at, updated_at,
        submission_state, submission, metadata, schema_version, approval
    ) VALUES (
        p_namespace, p_week_id || '-' || next_seq::text, p_week_id, next_seq, p_key, p_fingerprint, 'allocated',
        p_now, p_now, (p_submission ->> 'state')::{schema}.submission_state, p_submission, p_metadata,
        p_schema_version, NULL
    ) RETURNING 'new', recorded, e.episode_id, e.week_id, e.sequence, e.allocation_key, e.fingerprint, e.status,
        e.created_at, e.updated_at, e.submission_state::text, e.submission::text, e.metadata::text,
        e.schema_version, e.approval::text;
END
$$;
