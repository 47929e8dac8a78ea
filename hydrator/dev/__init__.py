"""A local dev loop: a broker that stays up, Debezium on one's own table, and a topic reader."""
