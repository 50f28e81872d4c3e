"""keel inside training frameworks that step the optimizer themselves.

- ``keel.integrations.transformers.attach(trainer)``: the Hugging Face Trainer.
- ``keel.integrations.lightning.KeelCallback()``: Lightning, automatic and manual optimization.
- Accelerate needs none: ``keel.Probe(model, optimizer)`` over the prepared ones (docs/FRAMEWORKS.md).

Each imports its framework only when it is imported itself. All rest on one mechanism,
``keel.Probe.intercept_step``: the framework's ``optimizer.step()`` becomes keel's step.
"""
