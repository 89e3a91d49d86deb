# A program written for llama-cpp-python, unchanged but for its first import
# (from llama_cpp import Llama).  python3 llama_cpp_program.py MODEL.gguf
from hetero import Llama
import sys

llm = Llama(model_path=sys.argv[1], n_ctx=2048, n_threads=2, seed=1337, verbose=False)

# The README's first example: a completion with stop strings and echo.
output = llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\n"], echo=True)
print(output["choices"][0]["text"])
print("usage:", output["usage"])

# Chat completion with a system prompt.
reply = llm.create_chat_completion(
    messages=[
        {"role": "system", "content": "You are an assistant who perfectly describes images."},
        {"role": "user", "content": "Describe this image in detail please."},
    ],
    max_tokens=40,
)
print(reply["choices"][0]["message"]["role"], "->", reply["choices"][0]["message"]["content"])

# A streamed completion.
for chunk in llm("The three laws of robotics are", max_tokens=24, stream=True, temperature=0):
    print(chunk["choices"][0]["text"], end="", flush=True)
print()

# Tokens.
tokens = llm.tokenize(b"Hello, world!")
print(tokens, llm.detokenize(tokens), llm.n_ctx(), llm.token_eos())
