"""Write ``helpers/data/eval/quality-v1.jsonl``: the quality gate's evaluation set, made by rule.

Short questions with checkable answers that a 135M instruct model gets right a fair share of the
time: capitals, small arithmetic, unit facts, sentence completions, first/last letters. Each line is
``{"id", "category", "prompt", "answers"}``; an answer counts when one of ``answers`` appears as whole
words in the normalized output (``helpers.benchmark.quality.is_correct``). Operands never equal
the result and letters are never "a" or "i", so an echoed question or an article cannot pass.
Deterministic: run it again and the file is the same.

    .venv/bin/python scripts/make_eval_set.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "helpers" / "data" / "eval" / "quality-v1.jsonl"

CAPITALS = [
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Japan", "Tokyo"),
    ("Russia", "Moscow"), ("England", "London"), ("the United Kingdom", "London"), ("Egypt", "Cairo"),
    ("China", "Beijing"), ("Greece", "Athens"), ("Portugal", "Lisbon"), ("Austria", "Vienna"),
    ("Ireland", "Dublin"), ("Norway", "Oslo"), ("Sweden", "Stockholm"), ("Denmark", "Copenhagen"),
    ("Finland", "Helsinki"), ("Poland", "Warsaw"), ("Hungary", "Budapest"), ("Thailand", "Bangkok"),
    ("South Korea", "Seoul"), ("Argentina", "Buenos Aires"), ("Peru", "Lima"), ("Kenya", "Nairobi"),
    ("Canada", "Ottawa"), ("Australia", "Canberra"), ("the United States", "Washington"), ("India", "New Delhi"),
    ("Mexico", "Mexico City"), ("Cuba", "Havana"), ("Belgium", "Brussels"), ("the Netherlands", "Amsterdam"),
    ("Switzerland", "Bern"), ("Turkey", "Ankara"),
]  # fmt: skip

UNITS = [
    ("How many minutes are in one hour?", ["60", "sixty"]),
    ("How many seconds are in one minute?", ["60", "sixty"]),
    ("How many hours are in one day?", ["24", "twenty-four", "twenty four"]),
    ("How many days are in one week?", ["7", "seven"]),
    ("How many months are in one year?", ["12", "twelve"]),
    ("How many days are in a leap year?", ["366"]),
    ("How many centimeters are in one meter?", ["100", "one hundred"]),
    ("How many millimeters are in one centimeter?", ["10", "ten"]),
    ("How many meters are in one kilometer?", ["1000", "1,000", "one thousand"]),
    ("How many grams are in one kilogram?", ["1000", "1,000", "one thousand"]),
    ("How many milliliters are in one liter?", ["1000", "1,000", "one thousand"]),
    ("How many inches are in one foot?", ["12", "twelve"]),
    ("How many feet are in one yard?", ["3", "three"]),
    ("How many years are in one century?", ["100", "one hundred"]),
    ("How many years are in one decade?", ["10", "ten"]),
    ("How many weeks are in one year?", ["52", "fifty-two", "fifty two"]),
    ("How many sides does a triangle have?", ["3", "three"]),
    ("How many sides does a square have?", ["4", "four"]),
    ("How many legs does a spider have?", ["8", "eight"]),
    ("How many continents are there on Earth?", ["7", "seven"]),
    ("At what temperature in degrees Celsius does water freeze?", ["0", "zero"]),
    ("At what temperature in degrees Celsius does water boil?", ["100", "one hundred"]),
]

COMPLETIONS = [
    ("The opposite of hot is", ["cold"]), ("The opposite of up is", ["down"]),
    ("The opposite of big is", ["small", "little"]), ("The opposite of day is", ["night"]),
    ("The opposite of black is", ["white"]), ("The opposite of fast is", ["slow"]),
    ("The opposite of open is", ["closed", "close", "shut"]), ("The opposite of happy is", ["sad", "unhappy"]),
    ("The day after Monday is", ["Tuesday"]), ("The day after Friday is", ["Saturday"]),
    ("The day before Sunday is", ["Saturday"]), ("The month after January is", ["February"]),
    ("The month after June is", ["July"]), ("The month before December is", ["November"]),
    ("The color of the sky on a clear day is", ["blue"]), ("The color of fresh grass is", ["green"]),
    ("The color of snow is", ["white"]), ("Bananas are usually the color", ["yellow"]),
    ("The largest planet in our solar system is", ["Jupiter"]), ("The planet we live on is called", ["Earth"]),
    ("The star at the center of our solar system is the", ["Sun"]), ("Water is made of hydrogen and", ["oxygen"]),
    ("A baby cat is called a", ["kitten"]), ("A baby dog is called a", ["puppy"]),
    ("The animal known as the king of the jungle is the", ["lion"]),
    ("The chemical symbol for gold is", ["Au"]), ("The chemical formula of water is", ["H2O"]),
    ("The language spoken in France is", ["French"]),
    ("The language spoken in Spain is", ["Spanish"]), ("The author of Romeo and Juliet is William", ["Shakespeare"]),
    ("The fastest land animal is the", ["cheetah"]), ("The tallest animal in the world is the", ["giraffe"]),
    ("Honey is made by", ["bees", "bee", "honeybees"]),
]  # fmt: skip

WORDS = ["dog", "house", "tree", "book", "green", "river", "water", "pencil", "orange", "lemon", "mouse", "table",
         "garden", "yellow", "summer", "window", "sugar", "rocket", "planet", "kettle"]  # fmt: skip


def arithmetic(rng: random.Random) -> list[dict]:
    """Additions, subtractions and multiplications with small operands, none equal to the result."""
    items, seen = [], set()
    plan = [("+", 16), ("-", 12), ("*", 12)]
    for op, count in plan:
        made = 0
        while made < count:
            a, b = rng.randint(2, 30 if op != "*" else 12), rng.randint(2, 20 if op != "*" else 10)
            if op == "-" and a <= b:
                a, b = b + a, a
            result = {"+": a + b, "-": a - b, "*": a * b}[op]
            if result in (a, b) or (a, op, b) in seen:
                continue
            seen.add((a, op, b))
            sym = {"+": "plus", "-": "minus", "*": "times"}[op]
            prompt = f"What is {a} {sym} {b}? Answer with the number."
            items.append(
                {"id": f"arith-{a}{op}{b}", "category": "arithmetic", "prompt": prompt, "answers": [str(result)]}
            )
            made += 1
    return items


def letters() -> list[dict]:
    """First and last letters of common words; "a" and "i" never answer (they are words themselves)."""
    items = []
    for w in WORDS:
        for which, letter in (("first", w[0]), ("last", w[-1])):
            if letter in "ai":
                continue
            prompt = f"What is the {which} letter of the word '{w}'?"
            items.append({"id": f"letter-{which}-{w}", "category": "spelling", "prompt": prompt, "answers": [letter]})
    return items


def build() -> list[dict]:
    """Every item of the set, in a fixed order."""
    items = [
        {"id": f"capital-{c.lower().replace(' ', '-')}", "category": "capital",
         "prompt": f"What is the capital of {c}?", "answers": [a]}
        for c, a in CAPITALS
    ]  # fmt: skip
    items += arithmetic(random.Random(20261201))
    items += [{"id": f"unit-{i:02d}", "category": "units", "prompt": q, "answers": a} for i, (q, a) in enumerate(UNITS)]
    items += [
        {"id": f"complete-{i:02d}", "category": "completion", "prompt": f"Complete the sentence: {s} ...",
         "answers": a}
        for i, (s, a) in enumerate(COMPLETIONS)
    ]  # fmt: skip
    items += letters()
    ids = [x["id"] for x in items]
    assert len(ids) == len(set(ids)), "item ids must be unique"
    return items


def main() -> int:
    """Write the set and print how many items of each category it has."""
    items = build()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in items), encoding="utf-8")
    counts: dict[str, int] = {}
    for x in items:
        counts[x["category"]] = counts.get(x["category"], 0) + 1
    print(f"{OUT}: {len(items)} items {counts}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
