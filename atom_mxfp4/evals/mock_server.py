"""A tiny OpenAI-compatible server that answers GSM8K from the local data by a fixed rule.

It exists to test `atom-mxfp4 eval gsm8k` end to end through the real lm-eval harness without a model.
For a prompt whose last question is test question i (looked up by exact text in `test.jsonl`), the
server's answer class is `pattern[i % len(pattern)]`, a pattern being a string over:

- `S`: the right number in GSM8K's format, `... #### <answer>`  -> strict-match right, flexible-extract right;
- `F`: the right number as `The answer is <answer>.`           -> strict-match wrong, flexible-extract right;
- `W`: a wrong number, `... #### <answer + 1>`                 -> both wrong.

`expected_outcomes(n, pattern)` gives the per-question 0/1 outcomes this rule implies.
Unknown questions get an empty answer. Endpoints: POST /v1/completions, POST /v1/chat/completions,
GET /v1/models. Run: `python -m atom_mxfp4.evals.mock_server --data-dir DIR --port P --pattern SFW`.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

QUESTION_TAG = "Question:"
ANSWER_TAG = "Answer:"


def gold_answer(answer_field: str) -> str:
    """The final number of a GSM8K answer (the text after '####'), commas removed."""
    return answer_field.split("####")[-1].strip().replace(",", "")


def check_pattern(pattern: str) -> str:
    if not pattern or set(pattern) - set("SFW"):
        raise ValueError(f"pattern must be a non-empty string over S, F, W, got {pattern!r}")
    return pattern


def answer_class(index: int, pattern: str) -> str:
    return pattern[index % len(pattern)]


def expected_outcomes(n: int, pattern: str) -> dict[str, list[int]]:
    """Per-question outcomes (1 = right) of the first n test questions under the rule, per lm-eval filter."""
    classes = [answer_class(i, check_pattern(pattern)) for i in range(n)]
    return {
        "strict-match": [int(c == "S") for c in classes],
        "flexible-extract": [int(c in "SF") for c in classes],
    }


def make_reply(index: int, answer: str, pattern: str) -> str:
    cls = answer_class(index, pattern)
    if cls == "S":
        return f" Let me work it out step by step.\n#### {answer}"
    if cls == "F":
        return f" Working through the steps gives the result. The answer is {answer}."
    wrong = str(int(answer) + 1) if answer.lstrip("-").isdigit() else answer + "1"
    return f" Let me work it out step by step.\n#### {wrong}"


def last_question(prompt: str) -> str:
    """The text between the last 'Question:' and the 'Answer:' that follows it."""
    tail = prompt.rsplit(QUESTION_TAG, 1)[-1]
    return tail.split(ANSWER_TAG, 1)[0].strip()


class _Handler(BaseHTTPRequestHandler):
    server: "MockServer"

    def log_message(self, fmt, *args):  # keep test output quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.server.model_name, "object": "model"}]})
        else:
            self._send(404, {"error": f"unknown path {self.path}"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.rstrip("/")
        if path == "/v1/completions":
            prompts = body.get("prompt", "")
            prompts = prompts if isinstance(prompts, list) else [prompts]
            choices = [
                {"index": i, "text": self.server.answer(p), "finish_reason": "stop", "logprobs": None}
                for i, p in enumerate(prompts)
            ]
            self._send(200, {"id": "mock", "object": "text_completion", "model": self.server.model_name,
                             "choices": choices})
        elif path == "/v1/chat/completions":
            messages = body.get("messages", [])
            user = [m for m in messages if m.get("role") == "user"]
            text = self.server.answer(user[-1]["content"] if user else "").strip()
            self._send(200, {"id": "mock", "object": "chat.completion", "model": self.server.model_name,
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": text}}]})
        else:
            self._send(404, {"error": f"unknown path {self.path}"})


class MockServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, data_dir: str | Path, pattern: str = "SFW", host: str = "127.0.0.1", port: int = 0,
                 model_name: str = "mock-gsm8k"):
        super().__init__((host, port), _Handler)
        self.pattern = check_pattern(pattern)
        self.model_name = model_name
        self.requests_served = 0
        self._lock = threading.Lock()
        # question text -> (test index, gold number)
        self.questions: dict[str, tuple[int, str]] = {}
        with open(Path(data_dir) / "test.jsonl") as f:
            for i, line in enumerate(f):
                row = json.loads(line)
                self.questions[row["question"].strip()] = (i, gold_answer(row["answer"]))

    def answer(self, prompt: str) -> str:
        with self._lock:
            self.requests_served += 1
        hit = self.questions.get(last_question(prompt))
        return "" if hit is None else make_reply(hit[0], hit[1], self.pattern)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "MockServer":
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder holding GSM8K test.jsonl")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--pattern", default="SFW", help="answer class of question i is pattern[i %% len(pattern)]")
    args = parser.parse_args()
    server = MockServer(args.data_dir, args.pattern, args.host, args.port)
    print(f"mock GSM8K server on {server.url} (pattern {args.pattern})", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
