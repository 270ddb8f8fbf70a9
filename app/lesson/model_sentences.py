"""The fixed sentences the head catalogue measures the real model on, and what each behaviour means.

Ten sentences have a pronoun whose noun a reader knows (the animal/street and trophy/suitcase pairs
turn on one word); eight have none. Each mark is a word that the sentence's WordPiece tokens hold
exactly once, so its position is found, never counted by hand (tests/lesson checks each).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.i18n import N_


@dataclass(frozen=True)
class ModelSentence:
    text: str
    pronoun: str | None = None  # the pronoun's WordPiece token, lower-cased as the model reads it
    antecedent: str | None = None  # the noun it stands for

    def positions(self, tokens: Sequence[str]) -> tuple[int, int] | None:
        """(pronoun, antecedent) positions in ``tokens`` (counted from 0, [CLS] at 0), or None if unmarked."""
        if self.pronoun is None or self.antecedent is None:
            return None
        found = []
        for word in (self.pronoun, self.antecedent):
            at = [i for i, t in enumerate(tokens) if t == word]
            if len(at) != 1:
                raise ValueError(f"{self.text!r}: {word!r} is {len(at)} of its tokens, not exactly one")
            found.append(at[0])
        return found[0], found[1]


MODEL_SENTENCES: tuple[ModelSentence, ...] = (
    ModelSentence("The animal didn't cross the street because it was too tired.", "it", "animal"),
    ModelSentence("The animal didn't cross the street because it was too wide.", "it", "street"),
    ModelSentence("The trophy didn't fit in the suitcase because it was too big.", "it", "trophy"),
    ModelSentence("The trophy didn't fit in the suitcase because it was too small.", "it", "suitcase"),
    ModelSentence("Sarah lost her keys, so she searched the whole house.", "she", "sarah"),
    ModelSentence("The scientists checked the data twice before they published the results.", "they", "scientists"),
    ModelSentence("My grandmother baked bread, and she gave some to the neighbours.", "she", "grandmother"),
    ModelSentence("The students learn faster when they explain ideas to each other.", "they", "students"),
    ModelSentence("The old man said that he would walk to the station.", "he", "man"),
    ModelSentence("The company hired a new chef because it wanted better food.", "it", "company"),
    ModelSentence("The quick brown fox jumps over the lazy dog."),
    ModelSentence("Attention lets every word look at every other word."),
    ModelSentence("She sat on the bank of the river and watched the boats."),
    ModelSentence("A cat, a dog and a bird live in our house."),
    ModelSentence("Paris is the capital of France; Berlin is the capital of Germany."),
    ModelSentence("The weather was cold, so we stayed inside and read books."),
    ModelSentence("How many layers does this model have?"),
    ModelSentence("I deposited the money at the bank on Monday."),
)
EXAMPLE_SENTENCE = 0  # the sentence every figure of the catalogue draws


@dataclass(frozen=True)
class BehaviourText:
    title: str
    short: str  # what the head does, in a few words: "previous token"
    whose: str  # whose attention the score is a share of
    explanation: str  # for a student, two sentences at most


BEHAVIOUR_TEXTS: dict[str, BehaviourText] = {
    "previous": BehaviourText(
        N_("Look at the word before"), N_("previous token"), N_("each token's"),
        N_("Each token sends its attention to the token just before it, so the head copies what came before "
        "into every word: a word learns its left-hand neighbour.")),
    "next": BehaviourText(
        N_("Look at the word after"), N_("next token"), N_("each token's"),
        N_("Each token looks at the token just after it. Reading in both directions is what lets BERT's words "
        "know their right-hand context too.")),
    "cls": BehaviourText(
        N_("Park on [CLS]"), N_("attention on [CLS]"), N_("each token's"),
        N_("The weight piles up on [CLS], the token before the sentence. A softmax row must add up to 1, so a "
        "head with nothing useful to add for a word parks its weight somewhere harmless.")),
    "sep": BehaviourText(
        N_("Park on [SEP]"), N_("attention on [SEP]"), N_("each token's"),
        N_("A head of this kind piles its weight on [SEP], the token after the sentence: another harmless "
        "place to park it, common in BERT models.")),
    "punctuation": BehaviourText(
        N_("Look at punctuation"), N_("attention on punctuation"), N_("each token's"),
        N_("A head of this kind sends its weight to commas, apostrophes and full stops, which mark where "
        "phrases end.")),
    "antecedent": BehaviourText(
        N_("Send a pronoun to its noun"), N_("pronoun to its noun"), N_("the pronoun's"),
        N_("From a pronoun (it, she, they) to the noun it stands for: in “…because it was too tired”, from "
        "“it” to “animal”. Measured on the pronoun's row only.")),
}
