"""The API kinds the probes speak, one module each, and the one registry from ApiKind to them.
In the client layer, beside the transports that call them (probes/client):

- base.py: what a kind is (ApiProtocol): where its requests go and how its key is sent, how
  its request is built, shaped and encoded, how a stream event or a whole answer becomes the
  Measurement, its per-kind figures, the workload fields (flags) it takes, and what it needs
  from the simulator;
- registry.py: ApiKind -> its object (PROTOCOLS), and what follows from a target's kind
  (its URL, its auth and fixed headers);
- streaming.py: the shared base: JSON encoding, deadlines, the OpenAI-style stream state that
  the other readers extend, the Measurement builders;
- reply_collector.py: what a request that keeps its reply keeps of it (text, tool calls);
- shapes.py: a chat-shaped conversation in the Responses and Anthropic shapes;
- one module per kind: openai_chat.py, openai_completions.py, openai_responses.py,
  anthropic_messages.py, openai_embeddings.py, rerank.py, openai_transcriptions.py,
  openai_speech.py, openai_images.py, openai_videos.py, http.py.

Adding a kind: its module (a subclass of ApiProtocol and its instance), its row in
registry.py, its name in client/target.py's ApiKind, and its route in the simulator.
"""
