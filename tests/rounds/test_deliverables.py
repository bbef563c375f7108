"""The user's words as product names: the deliverables a request lists, however it phrases the
list (after a colon, after "N things", as bullets or lines, in a sentence), and the renames,
additions and removals a change to the plan asks for."""

from __future__ import annotations

import pytest

from cabal.rounds.deliverables import DEFAULT_DELIVERABLES, PlanChange, deliverables, plan_change

ON_CALL = ("Revised on-call policy", "Rota for the holidays", "One-page guide for new staff")


@pytest.mark.parametrize(("request_text", "expected"), [
    # after "N things" and a colon (issue 38: gave a product named "Three things")
    ("We need three things: a revised on-call policy, a rota for the holidays, and a one-page guide for new staff.",
     ON_CALL),
    # an imperative whose deliverables follow a colon (issue 38: gave the default three)
    ("Prepare our move to the cloud: the options to weigh, a schedule for the first month, and a short guide.",
     ("Options to weigh", "Schedule for the first month", "Short guide")),
    ("Our food bank is replacing its paper intake cards with a tablet form next month. From the notes attached, we "
     "need three things: a decision on what the new form asks and what we stop collecting, a switchover plan for our "
     "two Saturday sessions, and a one-page briefing for volunteers.",
     ("Decision on what the new form asks and what we stop collecting",
      "Switchover plan for our two Saturday sessions", "One-page briefing for volunteers")),
    ("We are launching Margin, a note-taking app, next quarter. Plan the launch: a launch brief that says who it is "
     "for and what we promise, a pricing decision, and a launch-day checklist.",
     ("Launch brief that says who it is for and what we promise", "Pricing decision", "Launch-day checklist")),
    ("Prepare the launch of Margin, a note-taking app for students: what students need from it, and a price they "
     "will pay.", ("What students need from it", "Price they will pay")),
    ("We need the following three documents: a privacy note, a consent form and a retention schedule.",
     ("Privacy note", "Consent form", "Retention schedule")),
    ("Help us with the following: a plan, a budget and a poster.", ("Plan", "Budget", "Poster")),
    ("Here is what we need: a floor plan and a seating chart.", ("Floor plan", "Seating chart")),
    ("We need two documents - a handbook and a checklist.", ("Handbook", "Checklist")),
    ("We need three things: 1) a policy, 2) a rota, and 3) a guide.", ("Policy", "Rota", "Guide")),
    # a count that announces the sentences after it
    ("We need three things. A revised on-call policy, a rota for the holidays and a one-page guide for new staff.",
     ON_CALL),
    ("We need two documents. First, a handbook for volunteers. Second, a checklist for the first day.",
     ("Handbook for volunteers", "Checklist for the first day")),
    # lists in a sentence
    ("Could you put together a budget, a timeline and a risk register?", ("Budget", "Timeline", "Risk register")),
    ("The team should produce a press kit and a launch email.", ("Press kit", "Launch email")),
    ("I'm looking for a comparison table and a recommendation.", ("Comparison table", "Recommendation")),
    ("We need a budget; a timeline; a risk list.", ("Budget", "Timeline", "Risk list")),
    ("We need a menu, a shopping list, a seating plan.", ("Menu", "Shopping list", "Seating plan")),
    ("We'd like a FAQ as well as a glossary.", ("FAQ", "Glossary")),
    ("Please write a blog post and also a tweet.", ("Blog post", "Tweet")),
    ("We need both a policy and a guide.", ("Policy", "Guide")),
    ("Our deliverables are a report and a slide deck.", ("Report", "Slide deck")),
    ("Can you draft a job ad and an interview plan for a barista?", ("Job ad", "Interview plan for a barista")),
    ("Send us a packing list.", ("Packing list",)),
    ("I need a checklist for closing at night, too.", ("Checklist for closing at night",)),
    # across sentences, and what is no thing to deliver
    ("We need a welcome email. We also need a first-week schedule.", ("Welcome email", "First-week schedule")),
    ("Write a guide for new staff. Keep it to one page.", ("Guide for new staff",)),
    ("Write the README: short, friendly.", ("README",)),  # the head is the thing; the words after it describe it
    # lines after a colon
    ("We need:\nA policy\nA rota\nA guide", ("Policy", "Rota", "Guide")),
    # none named
    ("Compare Milvus and Qdrant for us. Targets: recall of 0.95, p99 under 50 ms, and nightly ingestion.",
     DEFAULT_DELIVERABLES),  # a colon list with no ask before it is no deliverable
    ("How should we price the new plan?", DEFAULT_DELIVERABLES),
])
def test_a_requests_list_becomes_its_product_names(request_text: str, expected: tuple[str, ...]) -> None:
    assert deliverables(request_text) == expected


NAMES = ("Three things", "Rota for the holidays", "One-page guide for new staff")


@pytest.mark.parametrize(("words", "expected"), [
    ("Rename 'Three things' to 'On-call policy'.", PlanChange(renamed=(("Three things", "On-call policy"),))),
    ("Rename 'Three things' to 'Revised on-call policy' and drop the rota.",
     PlanChange(renamed=(("Three things", "Revised on-call policy"),), removed=("Rota for the holidays",))),
    ("Three things should be called On-call policy", PlanChange(renamed=(("Three things", "On-call policy"),))),
    ("Rename the guide to Staff guide", PlanChange(renamed=(("One-page guide for new staff", "Staff guide"),))),
    ("Rename 'Three things' to 'On-call policy', drop the rota and add a contact list.",
     PlanChange(renamed=(("Three things", "On-call policy"),), added=("Contact list",), removed=("Rota for the holidays",))),
    ("Remove the one-page guide. Add a rain plan and a map.",
     PlanChange(added=("Rain plan", "Map"), removed=("One-page guide for new staff",))),
    ("We don't need the rota for the holidays.", PlanChange(removed=("Rota for the holidays",))),
    ("We also need a glossary too.", PlanChange(added=("Glossary",))),
    ("Also add a contact list; add the rota.", PlanChange(added=("Contact list",))),  # the rota is there already
    ("Drop the budget.", PlanChange(unknown=("Budget",))),  # no product has that name
    ("Looks fine, but keep it short.", PlanChange()),
])
def test_a_change_to_the_plan_names_what_it_renames_adds_and_removes(words: str, expected: PlanChange) -> None:
    assert plan_change(words, NAMES) == expected
