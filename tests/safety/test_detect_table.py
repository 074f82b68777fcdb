"""Phrasings of our own, written apart from the public corpus, each with its reason.

Risk phrasings sit next to harmless look-alikes that share their words. A failure here means a
rule reads a word instead of a situation.
"""

from __future__ import annotations

import pytest

from directory.snapshot import Directory
from safety import detect
from safety.model import LinearModel

Row = tuple[str, str, str]  # expected category, message, reason

DANGER: list[Row] = [
    ("danger", "ça sent grave le gaz chez moi depuis 1h", "gas + smell, intensifier between"),
    ("danger", "gros doute, y a une odeur de gaz sur le palier", "odeur de gaz, hedged"),
    ("danger", "jsens le gaz dans la cuisine c normal?", "glued 'je' + verb, SMS 'c'"),
    ("danger", "la bouteille de butane fuit sur le balcon", "butane + leak verb"),
    ("danger", "Une fuite de gaz dans l'immeuble, que faire ?", "leak named as a question"),
    ("danger", "ca pu le gas ds lescalier", "misspelt smell and gas, SMS 'ds'"),
    ("danger", "ça sent l'œuf pourri dans tout l'appart", "odorant smell, never says gas"),
    ("danger", "le detecteur de gaz sonne dans la cuisine", "gas detector"),
    ("danger", "Ça schlingue le gaz dans la cave !!", "slang smell verb"),
    ("danger", "GAZ!!! ça pue dans tout le couloir", "caps, gas before the smell"),
    ("danger", "ça sent le gaaaaz", "repeated letters"),
    ("danger", "pas de bruit ce soir par contre ça sent le gaz", "negation ends at 'par contre'"),
    ("danger", "y a pas de fumée mais ça sent le gaz à fond", "negated smoke, real gas"),
    ("danger", "il y a le feu au 2eme etage", "fire named"),
    ("danger", "au feu!!! l immeuble brule", "shout and burning building"),
    ("danger", "de la fumée sort de l'appartement d'à côté et ça sent le brûlé", "smoke + burning"),
    ("danger", "incendie dans le local velo", "incendie"),
    ("danger", "la poubelle du hall a pris feu", "caught fire"),
    ("danger", "fumée noire dans la cage d'escalier, on fait quoi", "black smoke"),
    ("danger", "l'appart du dessous est en feu", "en feu"),
    ("danger", "des flammes sortent de la fenêtre du voisin", "flames"),
    ("danger", "la cuisine du voisin est en flammes", "'cuisine' as a room is not cooking"),
    ("danger", "le scooter en bas brûle", "something burning, present tense"),
    ("danger", "ça crame dans la cave", "slang 'ça crame'"),
    ("danger", "on voit plus rien tellement ya de fumee dans le couloir", "smoke-filled"),
    ("danger", "l'alarme incendie sonne et ça sent la fumée", "fire alarm + smoke smell"),
    ("danger", "la prise de la cuisine a fait des étincelles et maintenant elle fume", "sparks"),
    ("danger", "odeur de plastique brûlé qui vient de la multiprise", "melting power strip"),
    ("danger", "le tableau électrique grésille et sent le chaud", "crackling panel"),
    ("danger", "le fil du radiateur a fondu", "melted cable"),
    ("danger", "la rallonge est toute noircie et elle chauffe trop", "blackened, overheating"),
    ("danger", "des étincelles sortent de l'interrupteur", "sparking switch"),
    ("danger", "l'eau coule sur les prises de la salle de bain", "water on sockets"),
    (
        "danger",
        "le plafonnier fait des étincelles depuis que l'eau coule du plafond",
        "water+light",
    ),
    ("danger", "mon fils a pris une décharge en touchant la prise", "electric shock"),
    ("danger", "la batterie de la trottinette gonfle et fume", "swelling battery"),
    ("danger", "la chaudière fait un bruit bizarre et on a tous mal à la tête", "CO symptoms"),
    ("danger", "mon detecteur de monoxyde de carbone sonne", "CO alarm"),
    ("danger", "le poêle tourne depuis ce matin et j'ai des vertiges et la nausée", "CO stove"),
    ("danger", "la chaudière du voisin fuit et il a des maux de tête", "boiler + headache"),
    ("danger", "ma voisine est tombée dans l'escalier elle saigne beaucoup", "fall + bleeding"),
    ("danger", "un homme est allongé par terre devant l'immeuble et il bouge pas", "down"),
    ("danger", "le vieux monsieur du 4e ne répond plus, je l'entends gémir", "moaning"),
    ("danger", "le voisin a fait une crise d'épilepsie dans le hall", "seizure"),
    ("danger", "elle s'est évanouie sur le palier", "fainted"),
    ("danger", "quelqu'un ne respire plus dans la cour", "not breathing"),
    ("danger", "un ouvrier est tombé de l'échafaudage, il bouge plus", "fall from height"),
    ("danger", "mon fils est tombé du balcon", "fall from a balcony"),
    ("danger", "le voisin s'est effondré dans l'ascenseur, il respire mal", "collapse"),
    ("danger", "une dame inconsciente dans le hall", "unconscious"),
    ("danger", "le petit du dessus a avalé des produits ménagers", "poisoning"),
    ("danger", "la voisine du 1er ne bouge plus, elle est par terre", "down, not moving"),
    ("danger", "le voisin frappe sa femme en ce moment, j'entends tout", "assault on a person"),
    ("danger", "ils se battent dans le hall avec du sang partout", "fight with blood"),
    ("danger", "j'entends un enfant hurler et des coups, ça dure depuis 10 minutes", "child"),
    ("danger", "à l'aide mon voisin défonce ma porte", "cry for help"),
    ("danger", "au secours il veut me tuer", "cry for help, threat to life"),
    ("danger", "mon mari me frappe je suis enfermée dans la salle de bain", "assault on me"),
    ("danger", "bagarre générale devant l'immeuble", "brawl"),
    ("danger", "mon voisin me tape dessus", "being hit"),
    ("danger", "la voisine se fait battre par son mec, je l'entends supplier", "beaten"),
    ("danger", "il étrangle sa copine dans l'escalier", "strangling"),
    ("danger", "un mec avec un pistolet dans la cage d'escalier", "gun"),
    ("danger", "il a sorti un couteau et il crie dans le couloir", "knife drawn"),
    ("danger", "j'ai entendu des coups de feu dans la rue", "gunshots"),
    ("danger", "le voisin menace tout le monde avec une hache", "axe threat"),
    ("danger", "il y a un homme armé dans l'immeuble", "armed person"),
    ("danger", "le gars du 3e tire sur les pigeons avec une carabine", "firing a rifle"),
    ("danger", "on entend des tirs dans la cité", "gunfire"),
    ("danger", "le plafond s'est effondré dans la salle de bain", "collapse"),
    ("danger", "le mur de la cuisine se fissure et des morceaux tombent", "crack + falling"),
    ("danger", "le balcon est en train de s'écrouler", "collapsing balcony"),
    ("danger", "LE BALCON DU DESSUS S'EFFONDRE", "caps"),
    ("danger", "tout le plafond vient de tomber dans la chambre, il y a des gravats", "debris"),
    (
        "danger",
        "Je ne peux pas parler, il est dans l'appartement d'à côté et il tape sur ma porte, je suis cachée.",
        "hiding, aggressor at the door",
    ),
]

DISTRESS: list[Row] = [
    ("detresse", "je veux mourir", "wish to die"),
    ("detresse", "j'ai envie de me suicider", "suicide named"),
    ("detresse", "je vais me tuer ce soir", "plan tonight"),
    ("detresse", "je pense au suicide depuis des semaines", "ideation"),
    ("detresse", "jvé me foutre en l'air", "SMS spelling, idiom for suicide"),
    ("detresse", "je supporte plus rien, je veux que tout s'arrête, ne plus me réveiller", "sleep"),
    ("detresse", "j'ai plus goût à rien, je veux juste mourir", "anhedonia + wish"),
    ("detresse", "je me suis encore coupé les bras hier", "self-harm, past habit"),
    ("detresse", "je me scarifie quand le bruit recommence", "self-harm"),
    ("detresse", "j'en ai marre de vivre", "tired of living"),
    ("detresse", "je vais sauter du balcon", "jump"),
    ("detresse", "personne ne remarquerait si je partais pour de bon", "burden"),
    ("detresse", "je n'ai plus envie de vivre", "negation carries the distress"),
    ("detresse", "j'ai acheté des médicaments pour en finir", "means"),
    ("detresse", "jveux plus exister", "glued je, negation"),
    ("detresse", "je prévois de me pendre ce week-end", "plan"),
    ("detresse", "j'ai pris tous mes cachets d'un coup", "overdose"),
    ("detresse", "la vie n'a plus de sens, je veux partir", "meaninglessness"),
    ("detresse", "jsuis suicidaire", "SMS + suicidal"),
    ("detresse", "je me fais du mal pour tenir", "self-harm"),
    ("detresse", "je n'en peux plus de vivre comme ça, je pense à me tuer", "ideation"),
    ("detresse", "j'ai envie d'en finir avec la vie", "'en finir avec la vie'"),
    ("detresse", "parfois je voudrais ne jamais me réveiller", "passive wish"),
    ("detresse", "je crois que je vais me jeter sous un train", "method"),
    ("detresse", "j'ai préparé une corde", "means prepared"),
    ("detresse", "je me suis tailladé les poignets", "self-harm"),
    ("detresse", "si je meurs personne ne s'en rendra compte", "invisibility"),
    ("detresse", "je suis un fardeau pour ma famille", "burden"),
    ("detresse", "ce serait plus simple si j'étais mort", "wish to be dead"),
    ("detresse", "je n'ai plus aucune raison de me lever le matin", "no reason"),
    ("detresse", "j'ai envie de crever, j'en peux plus", "slang wish to die"),
    ("detresse", "jai plus la force de vivre", "no strength to live"),
    ("detresse", "je me brûle les bras avec un briquet", "self-burning"),
    (
        "detresse",
        "Quelle dose de somnifères il faut pour ne plus se réveiller ?",
        "means asked as a question",
    ),
    (
        "detresse",
        "des fois je me dis que ce serait plus simple de disparaître",
        "'plus simple de disparaître'",
    ),
]

THREATS: list[Row] = [
    ("represailles", "il m'a dit qu'il allait me casser la gueule", "threat of a beating"),
    ("represailles", "le voisin m'a menacée avec son poing", "menace"),
    ("represailles", "ils m'ont dit que si je portais plainte ils brûleraient ma voiture", "cond."),
    ("represailles", "depuis ma plainte quelqu'un a crevé mes pneus", "damage after complaint"),
    ("represailles", "mon voisin m'a dit qu'il savait où j'habite", "knows where I live"),
    ("represailles", "il a dit que mes enfants allaient le payer", "threat against children"),
    ("represailles", "j'ai reçu une lettre anonyme avec des menaces", "anonymous letter"),
    ("represailles", "il m'attend devant chez moi depuis que j'ai appelé la police", "waiting"),
    (
        "represailles",
        "elle a dit qu'elle allait me pourrir la vie si je parlais au syndic",
        "veiled",
    ),
    ("represailles", "il a tagué 'balance' sur ma porte", "tag calling me a snitch"),
    ("represailles", "j'ai peur qu'il se venge si je porte plainte", "fear of revenge"),
    ("represailles", "il me harcèle depuis que j'ai écrit au syndic", "harassment"),
    ("represailles", "il a menacé de me frapper si je rappelle la police", "conditional threat"),
    ("represailles", "le voisin m'a dit qu'il me ferait payer ma plainte", "make me pay"),
    ("represailles", "depuis que j'ai fait la pétition, on a rayé ma voiture", "damage"),
    ("represailles", "il a dit à ma femme qu'elle ferait mieux de faire attention", "veiled"),
    ("represailles", "il a écrit des menaces sur ma porte", "written threats"),
    ("represailles", "il m'a suivie jusqu'à chez moi hier soir", "followed"),
    ("represailles", "j'ose plus rentrer chez moi à cause du voisin", "afraid to go home"),
    ("represailles", "il m'a dit 'je vais te défoncer' dans l'ascenseur", "quoted threat"),
    ("represailles", "si j'appelle encore les flics il va s'en prendre à mon chien", "pet"),
    ("represailles", "le voisin a crevé mes pneus après ma lettre au syndic", "damage"),
    ("represailles", "ils m'ont dit qu'ils allaient me retrouver", "will find me"),
    (
        "represailles",
        "Il m'a dit « si tu rappelles la police je te fais la peau ».",
        "'je te fais la peau'",
    ),
    (
        "represailles",
        "mon voisin ma frappé hier soir et il dit quil recommencera si je porte plainte",
        "past blow, repeat threatened",
    ),
]

HARMLESS: list[Row] = [
    ("rien", "le voisin fait un barbecue tous les week-ends, la fumée rentre chez moi", "bbq"),
    ("rien", "ça me tue ce bruit de perceuse", "hyperbole 'me tue'"),
    ("rien", "je suis morte de fatigue avec leurs fêtes", "idiom"),
    ("rien", "on a eu un dégât des eaux le mois dernier, c'est réparé", "past, repaired"),
    ("rien", "leur musique est à mourir d'ennui", "idiom"),
    ("rien", "je vais péter un plomb avec ce chien", "idiom"),
    ("rien", "la porte du garage claque", "door noise"),
    ("rien", "il fume sa cigarette sous ma fenêtre", "tobacco"),
    ("rien", "est-ce que je peux porter plainte pour tapage ?", "legal question"),
    ("rien", "le voisin fait des crêpes, ça sent le brûlé mais bon", "burnt cooking"),
    ("rien", "y a pas le feu, répondez quand vous pouvez", "idiom"),
    ("rien", "la fête d'hier c'était le feu", "slang: the party was great"),
    ("rien", "il m'a traité de tous les noms", "insult only"),
    ("rien", "le plancher craque quand il marche", "creaking floor is noise"),
    ("rien", "ils font brûler de l'encens, ça sent fort", "incense"),
    ("rien", "le chauffe-eau fait du bruit la nuit", "appliance noise"),
    ("rien", "j'en peux plus de ce chien, je vais écrire au syndic", "exasperation + plan"),
    ("rien", "mon voisin a menacé de porter plainte contre moi", "lawful 'threat'"),
    ("rien", "la voisine crie sur son chien", "shouting, no violence"),
    ("rien", "le match de foot, ils hurlent à chaque but", "cheering"),
    ("rien", "j'ai mal à la tête à cause du bruit", "headache without an appliance"),
    ("rien", "la prise de rdv à la mairie est compliquée", "'prise' not a socket"),
    ("rien", "le voisin du dessus tape des pieds", "footsteps"),
    ("rien", "le bébé pleure toute la nuit", "crying baby"),
    ("rien", "le gaz est coupé dans l'immeuble pour travaux", "gas off, no leak sign"),
    ("rien", "pas de fumée, pas d'odeur, juste du bruit", "everything negated"),
    ("rien", "je me coupe les cheveux moi même lol", "haircut"),
    ("rien", "il a un couteau suisse pour ouvrir ses colis", "tool knife"),
    ("rien", "coups de marteau à 7h du mat", "DIY noise"),
    ("rien", "c'est mortel leur nouvelle sono", "slang 'mortel'"),
    ("rien", "leur chien m'a fait peur", "fear of a dog"),
    ("rien", "la vmc fait de la vapeur sur mon balcon", "steam"),
    ("rien", "il fait bruler des bougies parfumées, ça sent fort", "candles"),
    ("rien", "mon voisin fume la chicha sur son balcon, la fumée rentre", "shisha"),
    ("rien", "j'ai une fissure dans mon mur depuis des années", "old crack, nothing falls"),
    ("rien", "je suis tombée sur ma voisine au supermarché", "'tomber sur' = meet"),
    ("rien", "la voisine m'a menacée d'appeler le syndic", "lawful 'threat'"),
    ("rien", "ils ont fait un barbecue et la fumée est partout chez moi", "bbq smoke"),
    ("rien", "ils ont mis le feu à la piste samedi soir", "idiom: great party"),
    ("rien", "je vais mourir de rire avec ses vocalises", "idiom"),
    ("rien", "pas de fumée ni d'odeur, seulement la musique", "negations"),
    ("rien", "le voisin fait sa cuisine au gaz, ça sent l'ail", "cooking smell"),
    ("rien", "le bruit des voitures au feu rouge", "traffic light"),
    ("rien", "le gamin du dessus pleure tous les soirs", "crying child, no blows"),
    ("rien", "ma voisine m'a aidée à porter mes courses", "help, not a cry"),
    ("rien", "il crie quand il joue à la console", "gaming"),
    ("rien", "l'électricien est passé, la prise est réparée", "repaired"),
    ("rien", "ça me saoule, je vais porter plainte", "annoyance"),
    ("rien", "franchement ce bruit me rend malade", "idiom"),
    ("rien", "ils ont une fête avec des bougies et des feux de bengale", "party fireworks"),
    ("rien", "le détecteur de fumée bip car il faut changer la pile", "battery chirp"),
    ("rien", "on m'a conseillé d'aller voir un conciliateur", "procedure"),
]


# Phrasings the shipped detector does not read right yet, each with the reason (expected to
# fail, strictly: one that starts passing leaves the table).
KNOWN = {
    "j'ose plus rentrer chez moi à cause du voisin": (
        "menace.intimidation fires, but the learned layer (risk 0.22) vetoes it: not daring to"
        " go home is as often fear of the dark, a noise or an accident in its lines"
    ),
    "bagarre générale devant l'immeuble": (
        "no rule says a brawl is going on now, and the learned layer reads 'bagarre' as a fight"
        " told afterwards"
    ),
    "je me coupe les cheveux moi même lol": (
        "the learned layer weighs a first-person 'je me coupe' toward distress more than 'lol'"
        " away from it"
    ),
    "il fait bruler des bougies parfumées, ça sent fort": (
        "the learned layer reads 'bruler' and 'ça sent fort' as a fire; candles are rare in its"
        " harmless lines"
    ),
}


@pytest.mark.parametrize(
    ("expected", "text"),
    [
        pytest.param(
            e,
            t,
            id=f"{e}: {r}",
            marks=pytest.mark.xfail(reason=KNOWN[t], strict=True) if t in KNOWN else (),
        )
        for e, t, r in DANGER + DISTRESS + THREATS + HARMLESS
    ],
)
def test_category(expected: str, text: str) -> None:
    detection = detect(text)
    assert detection.category == expected, (detection.rules, detection.risk, detection.normalized)


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        pytest.param("ça pue le gaz dans l'escalier", "gaz", id="gas"),
        pytest.param("le petit se fait frapper par son père", "enfant", id="child victim"),
        pytest.param("il a dit que mon fils devrait faire attention", "enfant", id="child threat"),
        pytest.param("je me scarifie", "automutilation", id="self-harm"),
        pytest.param("je veux mourir", "suicide", id="suicide"),
        pytest.param("un mec avec un couteau dans le hall", "arme", id="weapon"),
        pytest.param("la prise fait des étincelles", "electricite", id="electrical"),
        pytest.param("l'alarme CO sonne", "co", id="carbon monoxide"),
    ],
)
def test_topics_choose_the_contacts(text: str, topic: str) -> None:
    assert topic in detect(text).topics


def test_a_real_cue_survives_an_idiom_elsewhere() -> None:
    """Idioms neutralise their own words only (the rules alone: the learned layer may still
    weigh the joke)."""
    rules_only = LinearModel.rules_only()
    assert detect("y a pas le feu mais ça sent le gaz", model=rules_only).category == "danger"
    assert (
        detect("mort de rire... bon sinon j'ai envie de mourir", model=rules_only).category
        == "detresse"
    )


def test_spans_point_at_what_the_person_typed() -> None:
    text = "Bonjour. Ça PUE le GAZ !"
    detection = detect(text)
    quoted = {text[start:end] for start, end in detection.spans}
    assert quoted == {"PUE", "GAZ"}


def test_every_category_that_fired_is_on_the_card_danger_first() -> None:
    """Rules of three categories fire; the learned layer picks the primary one among them,
    and the card holds every one's contacts, danger's first."""
    detection = detect("il me menace avec un couteau et j'ai envie de mourir")
    assert set(detection.categories) == {"danger", "detresse", "represailles"}
    assert detection.category in detection.categories
    card = [
        c.id for c in Directory.national_only().card_for(detection.categories, detection.topics)
    ]
    assert card[0] == "police"  # the weapon's card comes first
    assert {"prevention-suicide", "france-victimes"} <= set(card)
