"""The study's attention backtrace (§3.2): ``ramplab attention``.

A key fact (the needle) is put at several depths of a filler context; a real transformer reads
each context with ``output_attentions=True``; the last layer's attention that every query
position pays to the answer token, averaged over heads, is reported against the signed distance
from that token.

- ``model``: a local Hugging Face model directory loaded offline (the packaged MiniLM by default);
- ``probe``: the token sequences — filler, needle at each depth, question — and the answer token;
- ``relevance``: the relevance vector from a model's attentions, and its summary by distance;
- ``render``: the tables, the JSON document and the plotly chart;
- ``run``: one run of them, as ``ramplab attention`` makes it (checked, measured, written).

``torch`` and ``transformers`` live in the optional extra ``ramplab[attention]`` and are imported
only by ``model`` and ``relevance``, inside functions: ``import ramplab.attention`` stays light.
"""
