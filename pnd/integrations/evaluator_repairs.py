"""lmms-eval 0.7.3's evaluator, repaired in the running process where pnd's models run (each repair does nothing
where lmms-eval already behaves): `(loss, is_greedy)` pairs reach multiple_choice scoring, and a document pnd could
not run counts as wrong there.

Example:
    >>> keep_loglikelihood_pairs()
    >>> import lmms_eval.evaluator
    >>> lmms_eval.evaluator.unwrap_generation_output((0.5, False))[0]
    (0.5, False)
"""

from __future__ import annotations

import functools

from .failed_documents import document_failed


def keep_loglikelihood_pairs() -> None:
    """Let `(loss, is_greedy)` results reach lmms-eval's multiple_choice scoring unchanged.

    lmms-eval 0.7.3's evaluator passes every result through `unwrap_generation_output`, which turns a
    `(float, bool)` pair into a string, so every multiple_choice task crashes (lmms-eval 0.7.3). This wraps
    that function for the running process; it does nothing where lmms-eval already keeps the pairs.
    """
    import lmms_eval.evaluator as evaluator

    unwrap = evaluator.unwrap_generation_output
    if unwrap((0.0, False))[0] == (0.0, False):
        return

    @functools.wraps(unwrap)
    def keep_pairs(output):
        if isinstance(output, tuple) and len(output) == 2 and isinstance(output[0], float) and isinstance(output[1], bool):
            return output, None
        return unwrap(output)

    evaluator.unwrap_generation_output = keep_pairs


def failed_choices_count_wrong() -> None:
    """Make lmms-eval's own multiple_choice scoring count a failed document (`FAILED_LOSS` for every choice) wrong.

    Its `process_results` takes the argmin of the losses, which is the first choice when all are equal: the right
    answer wherever the first choice is gold. For such a document this gives the lowest loss to a choice that is not
    gold (tasks with their own `process_results`, such as pnd's, ask `document_failed` themselves).
    """
    from lmms_eval.api.task import ConfigurableTask

    process_results = ConfigurableTask.process_results
    if getattr(process_results, "counts_failed_documents_wrong", False):
        return

    @functools.wraps(process_results)
    def counted_wrong(task, doc, results, *args, **kwargs):
        if (task.OUTPUT_TYPE == "multiple_choice" and not callable(task.config.process_results)
                and document_failed(results)):
            choices = task.doc_to_choice(doc)
            gold = task.doc_to_target(doc)
            gold = {choices.index(g) if isinstance(g, str) and g in choices else g
                    for g in (gold if isinstance(gold, list) else [gold])}
            wrong = next((i for i in range(len(results)) if i not in gold), None)
            results = [(0.0 if i == wrong else 1.0, False) for i in range(len(results))]
        return process_results(task, doc, results, *args, **kwargs)

    counted_wrong.counts_failed_documents_wrong = True
    ConfigurableTask.process_results = counted_wrong
