"""What the processes sharing one log dir stand on: the writer pool that hands partition
logs between them (``writers``), the append service (``append_service``), the per-process
instances (``per_root``), the inotify wake-up (``wakeup``), producer ids
(``producer_ids``) and the topic metadata (``metadata``). Below the clients and the
coordinators, above ``LogManager`` and ``Log``. This file imports nothing, so that
``LogManager`` can use ``pylog.logdir.metadata`` without loading the rest."""
