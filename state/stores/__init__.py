"""The durable store under the embedded engine's state stack (rocksdb.py); the state tools read
its files too."""
