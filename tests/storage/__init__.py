"""The storage classes, one test module each: what each pins is its public behaviour and
the exact bytes it puts on disk (docs/format/*.md), so the classes can be moved safely.

========================  ==================================  ============================
class                     code                                tests
========================  ==================================  ============================
``OffsetIndex``           pylog/index/offset_index.py         test_offset_index.py
``TimeIndex``             pylog/index/time_index.py           test_time_index.py
``TxnIndex``              pylog/index/txn_index.py            test_txn_index.py
``Segment``               pylog/segment/segment.py            test_segment.py
``LogFile``               pylog/segment/file.py               test_log_file.py
``FetchData``             pylog/segment/fetch.py              test_fetch_data.py
``PartitionDir``          pylog/partition_dir.py              test_partition_dir.py
checkpoint files          pylog/checkpoint.py                 test_checkpoint.py
``LogConfig``             pylog/config.py                     test_log_config.py
opening (``LogLoader``)   pylog/loader.py via ``Log.open``    test_log_loader.py
========================  ==================================  ============================
"""
