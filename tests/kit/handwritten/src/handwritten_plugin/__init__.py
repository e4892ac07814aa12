from vllm import ModelRegistry


def register() -> None:
    # By string, so vLLM imports the model code only in the processes that build the model.
    ModelRegistry.register_model(
        "MyLlamaForCausalLM", "handwritten_plugin.my_llama:MyLlamaForCausalLM"
    )
    ModelRegistry.register_model("MyTinyLlama", "handwritten_plugin.my_llama:MyTinyLlama")

    from vllm.tool_parsers import ToolParserManager

    ToolParserManager.register_lazy_module(
        "handwritten_json", "handwritten_plugin.tool_parser", "HandwrittenToolParser"
    )

    # By class: vLLM builds a new parser from it for each configuration it reads.
    from vllm.transformers_utils.config import register_config_parser

    from .config_parser import HandwrittenConfigParser

    register_config_parser("handwritten")(HandwrittenConfigParser)
