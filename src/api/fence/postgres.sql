-- redlatch fencing in PostgreSQL (redlatch::fence::postgres, docs/fencing.md).
-- Idempotent: run it once per database (in the schema that is first on the search_path);
-- running it again changes nothing.
--
-- redlatch_fence: per resource, the lock whose tokens fence it and the newest token a
-- committed transaction presented.
-- redlatch_fence(resource, lock, token, holder): the check, one statement inside the
-- caller's transaction. It returns the token when it is the newest seen for the resource
-- (equal passes for the holder that recorded it: one hold writing twice; an equal token of
-- another holder is a repeated token, refused) and records it; it raises
-- SQLSTATE RLF01 (a stale token: DETAIL is the newest token seen) or RLF02 (the resource
-- is fenced by another lock: DETAIL is that lock) otherwise, which aborts the transaction,
-- so nothing it wrote can commit. It locks the resource's row until the transaction ends:
-- transactions fencing one resource run their checks one after the other.
SELECT pg_advisory_xact_lock(7207424866353930579);

CREATE TABLE IF NOT EXISTS redlatch_fence (
    resource   text PRIMARY KEY,
    lock_name  text NOT NULL,
    token      bigint NOT NULL CHECK (token > 0),
    holder     text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION redlatch_fence(p_resource text, p_lock text, p_token bigint, p_holder text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE STRICT
SET search_path FROM CURRENT
AS $redlatch$
DECLARE
    seen_lock  text;
    seen_token bigint;
BEGIN
    INSERT INTO redlatch_fence AS f (resource, lock_name, token, holder, updated_at)
    VALUES (p_resource, p_lock, p_token, p_holder, now())
    ON CONFLICT (resource) DO UPDATE
        SET token = EXCLUDED.token, holder = EXCLUDED.holder, updated_at = EXCLUDED.updated_at
        WHERE f.lock_name = EXCLUDED.lock_name
          AND (f.token < EXCLUDED.token OR (f.token = EXCLUDED.token AND f.holder = EXCLUDED.holder));
    IF FOUND THEN
        RETURN p_token;
    END IF;
    -- Refused. ON CONFLICT locked the row, so this reads its newest committed version.
    SELECT lock_name, token INTO seen_lock, seen_token
    FROM redlatch_fence WHERE resource = p_resource;
    IF seen_lock <> p_lock THEN
        RAISE EXCEPTION USING ERRCODE = 'RLF02', DETAIL = seen_lock,
            MESSAGE = format('resource %L is fenced by lock %L, not %L', p_resource, seen_lock, p_lock);
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'RLF01', DETAIL = seen_token::text,
        MESSAGE = format('resource %L: fencing token %s of lock %L was superseded (the newest seen is %s)',
                         p_resource, p_token, p_lock, seen_token);
END
$redlatch$;
