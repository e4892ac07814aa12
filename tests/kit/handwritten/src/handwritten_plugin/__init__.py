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
