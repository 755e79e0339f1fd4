"""cicada's tiny Triton model: a deterministic stand-in for an LLM behind
Triton's vLLM backend interface, so that cicada's `triton` backend meets the
real server's generate extension (its JSON-to-tensor mapping, SSE framing and
errors) without a GPU.

It counts the prompt's tokens with the word-level tokenizer of
scripts/triton-server.sh, then "generates" `sampling_parameters.max_tokens`
words of that vocabulary (default 16), one response per token when
`stream` is true (a decoupled model, as the vLLM backend is), else one
response with the whole text, which starts with the prompt unless
`exclude_input_in_output` is true (the vLLM backend's default is false).
Every request's figures go to Triton's log as one line,
`cicada-tiny {json}`, the model's own record for the tests. A request
parameter `fail_after` (a top-level field of the generate body that is no
input) makes it fail with an error after that many tokens; `split_whole`
makes it send even a whole answer (`stream` false) as one response per
token, as a model that always streams does.
"""

import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils
from tokenizers import Tokenizer


def _scalar(request, name, default):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    if tensor is None:
        return default
    value = tensor.as_numpy().reshape(-1)[0]
    return value.decode() if isinstance(value, bytes) else value


class TritonPythonModel:
    def initialize(self, args):
        params = json.loads(args["model_config"])["parameters"]
        self.tokenizer = Tokenizer.from_file(params["tokenizer"]["string_value"])
        self.words = self.tokenizer.get_vocab_size() - 1  # less [UNK], id 0
        self.delay = float(params["token_delay_ms"]["string_value"]) / 1000.0

    def execute(self, requests):
        # decoupled: answer from threads, so requests overlap as in a server
        for request in requests:
            threading.Thread(target=self._answer, args=(request,), daemon=True).start()
        return None

    def _answer(self, request):
        sender = request.get_response_sender()
        try:
            self._generate(request, sender)
        except Exception as e:  # the client sees the error, the log says why
            print(f"cicada-tiny error {e!r}", flush=True)
            error = pb_utils.TritonError(f"cicada-tiny: {e}")
            sender.send(
                pb_utils.InferenceResponse(output_tensors=[], error=error),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )

    def _generate(self, request, sender):
        prompt = _scalar(request, "text_input", "")
        stream = bool(_scalar(request, "stream", False))
        exclude = bool(_scalar(request, "exclude_input_in_output", False))
        sampling = json.loads(_scalar(request, "sampling_parameters", "{}") or "{}")
        n = int(sampling.get("max_tokens", 16))
        prompt_ids = self.tokenizer.encode(prompt).ids
        start = len(prompt_ids)
        pieces = [
            " " + self.tokenizer.id_to_token(1 + (start + i) % self.words)
            for i in range(n)
        ]
        record = {
            "prompt_tokens": len(prompt_ids),
            "output_tokens": n,
            "stream": stream,
            "exclude_input_in_output": exclude,
            "sampling_parameters": sampling,
            "parameters": json.loads(request.parameters()),
        }
        print("cicada-tiny " + json.dumps(record, sort_keys=True), flush=True)

        def response(text):
            out = pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))
            return pb_utils.InferenceResponse(output_tensors=[out])

        fail_after = record["parameters"].get("fail_after")
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        if stream or record["parameters"].get("split_whole"):
            for i, piece in enumerate(pieces):
                if i == fail_after:
                    raise RuntimeError(f"failed after {i} tokens")
                time.sleep(self.delay)
                sender.send(response(piece), flags=final if i == n - 1 else 0)
            if n == 0:
                sender.send(flags=final)
        else:
            if fail_after is not None:
                raise RuntimeError(f"failed after {fail_after} tokens")
            time.sleep(self.delay * n)
            text = "".join(pieces)
            sender.send(response(text if exclude else prompt + text), flags=final)
