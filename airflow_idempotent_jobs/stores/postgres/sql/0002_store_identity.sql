-- Version 2: each namespace's identity, the random part of every idempotency token it hands out.
-- Without it two stores (staging and production, both namespace "default") derive the same token
-- for 2026-W32-0, and a provider that honours tokens hands one store the other's paid job.

CREATE TABLE {schema}.store_identity (
    namespace  text        NOT NULL,
    identity   text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT store_identity_pkey PRIMARY KEY (namespace),
    CONSTRAINT store_identity_identity_key UNIQUE (identity),
    CONSTRAINT store_identity_identity_check CHECK (identity ~ '^[0-9a-f]{32}$')
);

-- Namespaces already in use get theirs now. Their recorded submissions keep the tokens they were
-- sent with (the ledger reuses a recorded token); only new submissions derive from the identity.
INSERT INTO {schema}.store_identity (namespace, identity)
SELECT used.namespace, replace(gen_random_uuid()::text, '-', '')
FROM (SELECT namespace FROM {schema}.weeks UNION SELECT namespace FROM {schema}.episodes) AS used;

-- An identity is fixed for the store's life: changing or deleting it would change every token
-- handed out after, so a retry could no longer find its job by token (SQLSTATE IJ003).
CREATE FUNCTION {schema}.store_identity_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'namespace %: its store identity cannot change', OLD.namespace USING ERRCODE = 'IJ003';
END
$$;

CREATE TRIGGER store_identity_guard BEFORE UPDATE OR DELETE ON {schema}.store_identity
    FOR EACH ROW EXECUTE FUNCTION {schema}.store_identity_guard();
