"""The fixed texts the decoder's head catalogue measures SmolLM2 on, and what each of its behaviours means.

Ten ordinary English sentences of 10 to 30 tokens each (tests/maths/test_decoder_habits.py counts them with
the model's own tokenizer). They are read as they are, with no chat template and no start token, so a text's
first word is its first token. Induction is measured on repeated random tokens instead, drawn in
app.maths.decoder_habits.
"""

from __future__ import annotations

from app.i18n import N_
from app.lesson.model_sentences import BehaviourText

DECODER_TEXTS: tuple[str, ...] = (
    "The children ran down to the beach as soon as the rain stopped.",
    "My brother fixed the old bicycle and rode it to work every morning.",
    "A small bakery on the corner sells fresh bread before the sun comes up.",
    "The teacher asked the class to read the first chapter before Friday.",
    "When the train was late, the passengers waited on the cold platform for an hour.",
    "She planted tomatoes, beans and carrots in the garden behind her house.",
    "The museum opens at nine, but most visitors arrive after lunch.",
    "Heavy snow closed the mountain road, so the village was cut off for two days.",
    "He wrote a long letter to his grandmother and posted it on the way home.",
    "The library lends books, films and music to anyone who lives in the town.",
)
EXAMPLE_TEXT = 0  # the text a catalogue figure draws

DECODER_BEHAVIOUR_TEXTS: dict[str, BehaviourText] = {
    "previous": BehaviourText(
        N_("Look at the word before"), N_("previous token"), N_("each token's"),
        N_("Each token sends its attention to the token just before it. A decoder sees only the tokens to its "
        "left, and this head hands every token its left-hand neighbour.")),
    "sink": BehaviourText(
        N_("Park on the first token"), N_("attention on the first token"), N_("each token's"),
        N_("The weight piles up on the text's first token, whatever word it is. A softmax row must add up to 1, "
        "and the first token is the one place every query can see, so a head with nothing to add parks its "
        "weight there.")),
    "induction": BehaviourText(
        N_("Continue a repeated pattern"), N_("induction"), N_("each repeated token's"),
        N_("When a token has appeared before, the head looks at the token that came right after it last time: "
        "after “… Harry Potter … Harry”, it looks at “Potter”. This is how a model copies a pattern it has "
        "already seen, and it is measured on a random sequence of tokens read twice.")),
}
