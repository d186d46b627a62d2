#!/usr/bin/python3
"""Writes small task files in the HF hub schemas for tests/t_eval_real.sh (JSON Lines, one folder per task in
the layout `gdn eval --data-dir` reads). The strings are chosen to stress request construction with a real
tokenizer: trailing spaces/newlines/NBSP before the continuation, non-ASCII text, digits, a lambada line
without spaces (empty context), a context starting with the BOS text, RACE literals with quotes and escapes.

  real_data.py OUTDIR
"""
import json
import os
import sys

out = sys.argv[1]


def write(rel, rows):
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def arc(q, texts, key, labels="ABCDE"):
    return {"id": q[:8], "question": q, "choices": {"text": texts, "label": list(labels[: len(texts)])},
            "answerKey": key}


write("allenai/ai2_arc/ARC-Easy/test-00000-of-00001.jsonl", [
    arc("Which gas do plants absorb from the air?", ["oxygen", "carbon dioxide", "nitrogen", "helium"], "B"),
    arc("Qu'est-ce que le «café» ?", ["une boisson", "un pays"], "A"),
    arc("What is 12 × 12?", ["144", "124", "1212"], "A"),
])
write("Rowan/hellaswag/data/validation-00000-of-00001.jsonl", [
    {"ind": 4, "activity_label": "Removing ice from car", "ctx_a": "Then, the man writes over the snow covering the window of a car, and a woman wearing winter clothes smiles.",
     "ctx_b": "THEN", "ctx": "", "endings": [", the man adds wax to the windshield and cuts it.", ", a person board a ski lift, while two men supporting the head of the person wearing winter clothes snow as the we girls sled.",
                                               ", the man puts on a christmas coat, knitted with netting.", ", the man continues removing the snow on his car."],
     "source_id": "x", "split": "val", "split_type": "indomain", "label": "3"},
    {"ind": 9, "activity_label": "Home and Garden", "ctx_a": "[header] How to grow tomatoes [title] Pick a sunny spot.", "ctx_b": "",
     "ctx": "", "endings": ["[step] Water daily.", " Plant  in   shade.", "Use [sic] salt.", "Buy a\u00a0pot."], "source_id": "y",
     "split": "val", "split_type": "zeroshot", "label": "0"},
])
write("allenai/openbookqa/main/test-00000-of-00001.jsonl", [
    {"id": "1", "question_stem": "The sun is responsible for ", "choices": {"text": ["puppies learning new tricks", "plants sprouting, blooming and wilting"], "label": ["A", "B"]}, "answerKey": "B"},
])
write("baber/piqa/data/validation-00000-of-00001.jsonl", [
    {"goal": "How do I ready a guinea pig cage for it's new occupants?\n", "sol1": "Provide the guinea pig with a cage full of a few inches of bedding made of ripped paper strips.", "sol2": "Provide the guinea pig with a cage full of a few inches of bedding made of ripped jeans material.", "label": 0},
])
winogrande = [
    {"sentence": "Sarah was a much better surgeon than Maria so _ always got the harder cases.", "option1": "Sarah", "option2": "Maria", "answer": "1"},
    {"sentence": "The café's owner (José) thanked _ for the 10€ tip.", "option1": "Zoë", "option2": "the  guests", "answer": "2"},
]
write("allenai/winogrande/winogrande_xl/validation-00000-of-00001.jsonl", winogrande)
problems = [{"answer": "A", "options": ["a dog", "a cat", "a bird", "a fish"], "question": "Tom has  _  ."},
            {"answer": "C", "options": ["small", "old", "big", "it's \"red\""], "question": "What's true about the dog?"},
            {"answer": "B", "options": ["Tom", "Mary\\Ann", "Ann's", "Bob\n"], "question": "The dog belongs to _ ."}]
race = [{"example_id": "high1.txt", "article": "Tom has a dog. It is big.\nMary has a cat.", "problems": repr(problems)}]
write("EleutherAI/race/high/test-00000-of-00001.jsonl", race)
lambada = [{"text": "In my palm is a clear stone, and inside it is a small ivory statuette. A guardian angel.\n\n\"Figured if you're going to be out at night getting hit by cars, you might as well have some backup.\"\n\nI look at him, feeling stunned"},
           {"text": "Zwei  Leerzeichen vor dem Wort"}, {"text": "single"}, {"text": "<|begin_of_text|>starts with the BOS text"}]
write("EleutherAI/lambada_openai/default/test-00000-of-00001.jsonl", lambada)
wikitext = [{"page": " = Robert Boulter = \n \n Robert Boulter is an English film , television and theatre actor . He had a guest @-@ starring role on the television series The Bill in 2000 . \n"},
            {"page": " = = Career = = \n In 2006 , he starred alongside Whishaw in the play Citizenship ( written by Mark Ravenhill ) . \n"}]
write("EleutherAI/wikitext_document_level/wikitext-2-raw-v1/test-00000-of-00001.jsonl", wikitext)
write("cais/mmlu/abstract_algebra/test-00000-of-00001.jsonl", [
    {"question": "Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field. ", "subject": "abstract_algebra", "choices": ["0", "1", "2", "3"], "answer": 1},
])
write("cais/mmlu/abstract_algebra/dev-00000-of-00001.jsonl", [
    {"question": "Statement 1 | Every element of a group generates a cyclic subgroup of the group.", "subject": "abstract_algebra", "choices": ["True, True", "False, False", "True, False", "False, True"], "answer": 2},
])
