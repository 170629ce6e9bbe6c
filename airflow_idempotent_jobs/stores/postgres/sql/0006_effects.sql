-- Version 6: an episode's effects (Episode.effects: what happened after the payment, by name).
-- NULL while the episode has none: the row of an episode from before effects reads back unchanged.

ALTER TABLE {schema}.episodes ADD COLUMN effects jsonb;

ALTER TABLE {schema}.episodes ADD CONSTRAINT episodes_effects_check
    CHECK (effects IS NULL OR jsonb_typeof(effects) = 'object');

-- Whoever writes the row (a worker of an earlier release, hand-written SQL), an effect once
-- recorded never disappears, a done effect never changes, and each effect's history only grows:
-- its new history starts with the old one (SQLSTATE IJ012, DETAIL {"effect", "from", "to", "why"};
-- "to" is null for an effect that went away). A done effect run twice is the one thing the ledger
-- exists to prevent: that record is what tells a retry not to run it.
CREATE FUNCTION {schema}.episodes_guard_effects() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    effect_name text;
    old_effect  jsonb;
    new_effect  jsonb;
    old_history jsonb;
    new_history jsonb;
    why         text;
BEGIN
    FOR effect_name, old_effect IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(OLD.effects) e LOOP
        new_effect := NEW.effects -> effect_name;
        old_history := old_effect -> 'history';
        new_history := new_effect -> 'history';
        why := NULL;
        IF pg_catalog.jsonb_typeof(new_effect) IS DISTINCT FROM 'object' THEN
            why := 'an effect is never removed';
        ELSIF old_effect ->> 'state' = 'done' AND new_effect IS DISTINCT FROM old_effect THEN
            why := 'a done effect never changes';
        ELSIF pg_catalog.jsonb_typeof(old_history) = 'array' AND (
            pg_catalog.jsonb_typeof(new_history) IS DISTINCT FROM 'array'
            OR pg_catalog.jsonb_array_length(new_history) < pg_catalog.jsonb_array_length(old_history)
            OR EXISTS (
                SELECT 1 FROM pg_catalog.jsonb_array_elements(old_history) WITH ORDINALITY AS kept(entry, n)
                WHERE kept.entry IS DISTINCT FROM new_history -> (kept.n::integer - 1)
            )) THEN
            why := 'an effect''s history only grows';
        END IF;
        IF why IS NOT NULL THEN
            RAISE EXCEPTION 'episode %: effect %: %', OLD.episode_id, effect_name, why USING ERRCODE = 'IJ012',
                DETAIL = pg_catalog.json_build_object('effect', effect_name, 'from', old_effect ->> 'state',
                    'to', new_effect ->> 'state', 'why', why)::text;
        END IF;
    END LOOP;
    RETURN NEW;
END
$$;

-- Only rows that hold effects and whose effects change: allocations, ledger moves and approvals never get here.
CREATE TRIGGER episodes_guard_effects BEFORE UPDATE OF effects ON {schema}.episodes
    FOR EACH ROW WHEN (OLD.effects IS NOT NULL AND NEW.effects IS DISTINCT FROM OLD.effects)
    EXECUTE FUNCTION {schema}.episodes_guard_effects();
ALTER TABLE {schema}.episodes ENABLE ALWAYS TRIGGER episodes_guard_effects;

-- The function of version 5, answering the reused row's effects too (a new OUT column: dropped and
-- created again, in this migration's transaction).
DROP FUNCTION {schema}.allocate_episode(text, bigint, text, text, text, text, text, jsonb, jsonb, integer, text);

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
    OUT approval         text,
    OUT effects          text
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
        -- A new key, unless its row old_effect deleted: one statement reads the key's tombstone and the
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
            RAISE EXCEPTION 'allocation key''s episode row old_effect deleted' USING ERRCODE = 'IJ010', DETAIL = gone;
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
        effects := held.effects::text;
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
