"""The simulator's OpenAI Responses answers (`POST /v1/responses`), as data: a Completion's
tokens as Responses events (`response.created` ... `response.output_text.delta` ...
`response.completed`, each SSE event named for its `type`), and the whole response object.
An output cap reached ends with `response.incomplete` (reason `max_output_tokens`); an engine
error with `response.failed`."""

from __future__ import annotations

from typing import Any

from sustain.simulator.completion import Completion, named

FINISHED = {"length": ("incomplete", {"reason": "max_output_tokens"})}
"""A chat finish reason -> the response's status and incomplete_details (else completed)."""


class ResponsesEvents:
    """A Completion's stream and body in the Responses protocol (StreamEvents)."""

    def __init__(self, completion: Completion) -> None:
        self.completion = completion
        self.tokens = completion.tokens
        self.id = "resp_" + completion.id.rpartition("-")[2]
        self.item_id = ("fc_" if completion.tool is not None else "msg_") + \
            completion.id.rpartition("-")[2]
        self.sequence = 0
        self.reasoning_id = "rs_" + completion.id.rpartition("-")[2]

    def _event(self, kind: str, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return named(payload)

    def response(self, status: str, output: list[dict[str, Any]],
                 usage: bool = False) -> dict[str, Any]:
        c = self.completion
        body: dict[str, Any] = {"id": self.id, "object": "response", "created_at": c.created,
                                "status": status, "model": c.model, "output": output,
                                "incomplete_details": None}
        if status == "incomplete":
            body["incomplete_details"] = FINISHED["length"][1]
        if usage:
            body["usage"] = self.usage()
        return body

    def usage(self) -> dict[str, Any]:
        c = self.completion
        return {"input_tokens": c.prompt_tokens,
                "input_tokens_details": {"cached_tokens": c.cached_tokens or 0},
                "output_tokens": c.tokens,
                "output_tokens_details": {"reasoning_tokens": c.reasoning},
                "total_tokens": c.prompt_tokens + c.tokens}

    def item(self, done: bool) -> dict[str, Any]:
        c = self.completion
        status = "completed" if done else "in_progress"
        if c.tool is not None:
            return {"id": self.item_id, "type": "function_call", "status": status,
                    "call_id": c.tool.id, "name": c.tool.name,
                    "arguments": "".join(c.tool.pieces) if done else ""}
        content = [{"type": "output_text", "text": c.text(), "annotations": []}] if done \
            else []
        return {"id": self.item_id, "type": "message", "status": status, "role": "assistant",
                "content": content}

    def opening(self, zero: bool) -> list[bytes]:
        events = [self._event("response.created", response=self.response("in_progress", [])),
                  self._event("response.in_progress",
                              response=self.response("in_progress", []))]
        if zero:
            return events
        events.append(self._event("response.output_item.added", output_index=0,
                                  item=self.item(done=False)))
        if self.completion.tool is None:
            events.append(self._event("response.content_part.added", item_id=self.item_id,
                                      output_index=0, content_index=0, part={
                                          "type": "output_text", "text": "",
                                          "annotations": []}))
        return events

    def token_event(self, k: int) -> bytes:
        c = self.completion
        if k < c.reasoning:
            return self._event("response.reasoning_text.delta", item_id=self.reasoning_id,
                               output_index=0, content_index=0, delta=Completion.thought(k))
        k -= c.reasoning
        tool = c.tool
        if tool is not None:
            return self._event("response.function_call_arguments.delta", item_id=self.item_id,
                               output_index=0, delta=tool.pieces[k])
        return self.text_event(Completion.token(k))

    def reasoning_item(self) -> dict[str, Any]:
        """The reasoning output item (before the answer's), with its text once done."""
        return {"id": self.reasoning_id, "type": "reasoning", "summary": [],
                "content": [{"type": "reasoning_text",
                             "text": self.completion.reasoning_text()}]}

    def text_event(self, text: str) -> bytes:
        return self._event("response.output_text.delta", item_id=self.item_id,
                           output_index=0, content_index=0, delta=text)

    def error_event(self) -> bytes:
        failed = self.response("failed", [])
        failed["error"] = {"code": "server_error", "message": "injected engine error"}
        return self._event("response.failed", response=failed)

    def closing(self, finish: str, include_usage: bool) -> list[bytes]:  # noqa: ARG002
        """Usage always comes with the final response object."""
        c = self.completion
        status = FINISHED.get(finish, ("completed", None))[0]
        if not c.tokens:
            return [self._event(f"response.{status}",
                                response=self.response(status, [], usage=True))]
        events = []
        if c.tool is not None:
            events.append(self._event("response.function_call_arguments.done",
                                      item_id=self.item_id, output_index=0,
                                      arguments="".join(c.tool.pieces)))
        else:
            events += [self._event("response.output_text.done", item_id=self.item_id,
                                   output_index=0, content_index=0, text=c.text()),
                       self._event("response.content_part.done", item_id=self.item_id,
                                   output_index=0, content_index=0, part={
                                       "type": "output_text", "text": c.text(),
                                       "annotations": []})]
        item = self.item(done=True)
        output = [self.reasoning_item(), item] if c.reasoning else [item]
        events += [self._event("response.output_item.done", output_index=0, item=item),
                   self._event(f"response.{status}",
                               response=self.response(status, output, usage=True))]
        return events

    def usage_only(self) -> list[bytes]:
        return [self._event("response.completed",
                            response=self.response("completed", [], usage=True))]

    def whole(self, finish: str) -> dict[str, Any]:
        status = FINISHED.get(finish, ("completed", None))[0]
        output = [self.item(done=True)] if self.completion.tokens else []
        if self.completion.reasoning:
            output.insert(0, self.reasoning_item())
        return self.response(status, output, usage=True)
