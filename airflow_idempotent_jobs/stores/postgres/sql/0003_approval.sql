-- Version 3: a human's approval decision per episode (Episode.approval), and the status 'rejected'.
-- NULL while nobody was asked: the row of an episode from before approvals reads back unchanged.

ALTER TABLE {schema}.episodes ADD COLUMN approval jsonb;

ALTER TABLE {schema}.episodes ADD CONSTRAINT episodes_approval_check
    CHECK (approval IS NULL OR (
        jsonb_typeof(approval) = 'object' AND jsonb_typeof(approval -> 'history') IS NOT DISTINCT FROM 'array'
    ));

ALTER TABLE {schema}.episodes DROP CONSTRAINT episodes_status_check;
ALTER TABLE {schema}.episodes ADD CONSTRAINT episodes_status_check
    CHECK (status IN ('allocated', 'running', 'succeeded', 'failed', 'cancelled', 'rejected'));

-- Status 'rejected' if and only if the decision is a rejection, and a rejected episode spends
-- nothing: a writer that knows nothing of approvals (a worker of an earlier release, hand-written
-- SQL) cannot move a rejected row's ledger or status, nor call an undecided row rejected.
ALTER TABLE {schema}.episodes ADD CONSTRAINT episodes_rejected_check
    CHECK ((status = 'rejected') = (approval ->> 'decision' IS NOT DISTINCT FROM 'rejected')
           AND (status <> 'rejected' OR submission_state = 'none'));

-- A decision is final and its history append-only: whoever writes the row, a recorded decision
-- never changes or disappears, and the new history starts with the old one (SQLSTATE IJ004).
CREATE FUNCTION {schema}.episodes_guard_approval() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_history jsonb := OLD.approval -> 'history';
    new_history jsonb := NEW.approval -> 'history';
BEGIN
    IF jsonb_typeof(NEW.approval) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'episode %: its approval record cannot go away', OLD.episode_id USING ERRCODE = 'IJ004';
    END IF;
    IF OLD.approval ->> 'decision' IS NOT NULL
       AND (NEW.approval - 'history') IS DISTINCT FROM (OLD.approval - 'history') THEN
        RAISE EXCEPTION 'episode %: its recorded decision % cannot change', OLD.episode_id, OLD.approval -> 'decision'
            USING ERRCODE = 'IJ004';
    END IF;
    IF jsonb_typeof(new_history) IS DISTINCT FROM 'array'
       OR jsonb_array_length(new_history) < jsonb_array_length(old_history)
       OR EXISTS (
           SELECT 1 FROM jsonb_array_elements(old_history) WITH ORDINALITY AS kept(entry, n)
           WHERE kept.entry IS DISTINCT FROM new_history -> (kept.n::integer - 1)
       ) THEN
        RAISE EXCEPTION 'episode %: its approval history is append-only', OLD.episode_id USING ERRCODE = 'IJ004';
    END IF;
    RETURN NEW;
END
$$;

-- Only rows that hold an approval and whose approval changes: allocations and ledger moves never get here.
CREATE TRIGGER episodes_guard_approval BEFORE UPDATE OF approval ON {schema}.episodes
    FOR EACH ROW WHEN (OLD.approval IS NOT NULL AND NEW.approval IS DISTINCT FROM OLD.approval)
    EXECUTE FUNCTION {schema}.episodes_guard_approval();
