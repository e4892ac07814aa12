from vllm import ModelRegistry
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

# Mistake 1: the model module is imported here, in every vLLM process, although it is
# registered by string below.
from broken_plugin.my_llama import BrokenLlamaForCausalLM


def register() -> None:
    ModelRegistry.register_model(
        BrokenLlamaForCausalLM.__name__, "broken_plugin.my_llama:BrokenLlamaForCausalLM"
    )
    # Mistake 2: no guard; vLLM raises ValueError when a connector name is registered again.
    KVConnectorFactory.register_connector(
        "BrokenConnector", "broken_plugin.connector", "BrokenConnector"
    )
