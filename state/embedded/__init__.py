"""The embedded engine's state store: a stack of layers, each with one job, as Kafka Streams
stacks its caching store on its change-logging store on RocksDB. Spark keeps its state in its
own state store and uses none of this.

    TaskStore (store.py)         reads through the stack: the open transaction's writes, then
                                 the cache, then RocksDB (read your writes)
      StateCache (cache.py)      committed states and large values kept decoded, capped by bytes
      ChangelogLayer             the open transaction: changed states, their changelog records
        (changelog.py)           (rows, large values out of line), written to RocksDB only once
                                 the transaction committed
        RocksDBStore             the bytes on disk, block-compressed, with the changelog offset
          (state/stores/rocksdb.py)  they reflect

The byte layouts the layers write are state/layout.py's (keys) and state/codec.py's and
state/large.py's (values).
"""
