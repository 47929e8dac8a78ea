-- The sample table. `bio` and `profile` are stored out of line (TOAST; STORAGE EXTERNAL skips
-- compression, so every value past ~2 KB goes out of line): an UPDATE that leaves them alone
-- reaches Debezium without them, and the connector ships `__debezium_unavailable_value`.
CREATE TABLE customers (
    id        integer PRIMARY KEY,
    name      text NOT NULL,
    visits    integer NOT NULL DEFAULT 0,
    last_seen timestamptz NOT NULL DEFAULT now(),
    bio       text,
    profile   jsonb
);
ALTER TABLE customers ALTER COLUMN bio SET STORAGE EXTERNAL;
ALTER TABLE customers ALTER COLUMN profile SET STORAGE EXTERNAL;

INSERT INTO customers (id, name, bio, profile)
SELECT i,
       'customer ' || i,
       repeat('Customer ' || i || ' writes a long biography. ', 150),
       jsonb_build_object('id', i, 'notes', repeat('note ' || i || ' ', 600))
FROM generate_series(1, 10) AS i;
