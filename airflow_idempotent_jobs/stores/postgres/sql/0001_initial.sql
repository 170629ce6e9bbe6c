-- The PostgreSQL store, version 1. The store puts its quoted schema name where the SQL says so.
-- Invariants live here as well as in Python: a second writer that bypasses the store still
-- cannot duplicate a key or a sequence, nor make an illegal ledger move.

CREATE TYPE {schema}.submission_state AS ENUM (
    'none', 'submitting', 'accepted', 'succeeded', 'failed', 'unknown'
);

-- The high-water mark of each week: sequences are never reused, even if an episode row is deleted.
CREATE TABLE {schema}.weeks (
    namespace        text    NOT NULL,
    week_id          text    NOT NULL,
    highest_sequence integer NOT NULL,
    CONSTRAINT weeks_pkey PRIMARY KEY (namespace, week_id),
    CONSTRAINT weeks_week_id_check CHECK (week_id ~ '^[0-9]{4}-W[0-9]{2}$'),
    CONSTRAINT weeks_highest_sequence_check CHECK (highest_sequence >= 0)
);

-- One row per episode: the fields of Episode.to_record(), the submission record as JSONB and
-- its state as a column (so that transitions can be conditional updates).
CREATE TABLE {schema}.episodes (
    namespace        text    NOT NULL,
    episode_id       text    NOT NULL,
    week_id          text    NOT NULL,
    sequence         integer NOT NULL,
    allocation_key   text    NOT NULL,
    fingerprint      text,
    status           text    NOT NULL,
    created_at       text    NOT NULL,
    updated_at       text,
    submission_state {schema}.submission_state NOT NULL,
    submission       jsonb   NOT NULL,
    metadata         jsonb   NOT NULL,
    schema_version   integer NOT NULL,
    CONSTRAINT episodes_pkey PRIMARY KEY (namespace, episode_id),
    CONSTRAINT episodes_week_sequence_key UNIQUE (namespace, week_id, sequence),
    CONSTRAINT episodes_allocation_key_key UNIQUE (namespace, allocation_key),
    CONSTRAINT episodes_week_fkey FOREIGN KEY (namespace, week_id) REFERENCES {schema}.weeks (namespace, week_id),
    CONSTRAINT episodes_sequence_check CHECK (sequence >= 0),
    CONSTRAINT episodes_id_check CHECK (episode_id = week_id || '-' || sequence::text),
    CONSTRAINT episodes_allocation_key_check CHECK (char_length(allocation_key) BETWEEN 1 AND 512),
    CONSTRAINT episodes_status_check CHECK (status IN ('allocated', 'running', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT episodes_submission_state_check CHECK (submission ->> 'state' = submission_state::text)
);

-- Every legal move of the submission ledger (episode.TRANSITIONS; a test keeps them equal).
CREATE TABLE {schema}.submission_transitions (
    from_state {schema}.submission_state NOT NULL,
    to_state   {schema}.submission_state NOT NULL,
    CONSTRAINT submission_transitions_pkey PRIMARY KEY (from_state, to_state)
);

INSERT INTO {schema}.submission_transitions (from_state, to_state) VALUES
    ('none', 'submitting'),
    ('submitting', 'submitting'), ('submitting', 'accepted'), ('submitting', 'failed'),
    ('submitting', 'unknown'), ('submitting', 'none'),
    ('unknown', 'submitting'), ('unknown', 'accepted'), ('unknown', 'failed'), ('unknown', 'none'),
    ('accepted', 'accepted'), ('accepted', 'succeeded'), ('accepted', 'failed');

-- An episode's identity never changes, and its ledger moves only along submission_transitions:
-- whoever writes the row, an illegal update fails here (SQLSTATE IJ001 / IJ002).
CREATE FUNCTION {schema}.episodes_guard_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.namespace, NEW.episode_id, NEW.week_id, NEW.sequence, NEW.allocation_key, NEW.created_at)
       IS DISTINCT FROM
       (OLD.namespace, OLD.episode_id, OLD.week_id, OLD.sequence, OLD.allocation_key, OLD.created_at)
       OR NEW.fingerprint IS DISTINCT FROM OLD.fingerprint THEN
        RAISE EXCEPTION 'episode %: its identity cannot change', OLD.episode_id USING ERRCODE = 'IJ002';
    END IF;
    IF NEW.submission_state <> OLD.submission_state AND NOT EXISTS (
        SELECT 1 FROM {schema}.submission_transitions t
        WHERE t.from_state = OLD.submission_state AND t.to_state = NEW.submission_state
    ) THEN
        RAISE EXCEPTION 'episode %: submission cannot go from % to %',
            OLD.episode_id, OLD.submission_state, NEW.submission_state USING ERRCODE = 'IJ001';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER episodes_guard_update BEFORE UPDATE ON {schema}.episodes
    FOR EACH ROW EXECUTE FUNCTION {schema}.episodes_guard_update();
