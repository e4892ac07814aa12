from vllm.distributed.kv_transfer.kv_connector.v1.example_connector import ExampleConnector


class BrokenConnector(ExampleConnector):
    pass
