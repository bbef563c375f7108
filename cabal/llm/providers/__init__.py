"""The model providers Cabal can build a chat model for: one registry, one record a provider.

A spec names a provider the way ``langchain.chat_models.init_chat_model`` does,
``PROVIDER:MODEL`` (``openai:gpt-4.1-mini``, ``ollama:qwen3:8b``: only the first colon
splits), plus a bare ``claude-*`` name, ``scripted:PATH``, ``py:MODULE:FACTORY`` and
``simulated``. Each ``Provider`` says where its LangChain class lives and which pip package
and Cabal extra bring it, which variables hold its key (for the 'missing key' error and for
redaction), how tracing names it, and which family module builds its client and judges its
errors (``anthropic``, ``openai``, ``ollama``, ``generic``, ``local``). Nothing here imports a
provider's SDK: a family module does, when its provider is used.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from cabal.llm.settings import DEFAULT_MODEL
from cabal.vocabulary import install_command


@dataclass(frozen=True)
class Provider:
    """One provider of chat models."""

    name: str  # the spec's prefix: openai in openai:gpt-4o
    family: str  # the module of cabal.llm.providers that builds and judges it
    package: str = ""  # the module that holds its chat model class ('' for Cabal's own models)
    chat_class: str = ""
    pip: str = ""  # the distribution that brings ``package``
    extra: str | None = None  # the Cabal extra that brings it, when there is one
    key_variables: tuple[str, ...] = ()  # where its key may be; the first is the one to set
    key_required: bool = True  # False: a standard credential chain (AWS, Google Cloud) or no key
    secret_variables: tuple[str, ...] = ()  # other secrets of its credential chain, redacted too
    base_url_variable: str | None = None  # the SDK's own variable for another endpoint
    system: str = "_OTHER"  # gen_ai.provider.name in traces
    prices_id: str | None = None  # the provider's id in genai-prices (None: not priced there)
    sdk_modules: tuple[str, ...] = ()  # top-level modules whose exceptions are the provider's
    model_field: str = "model"  # the chat class's field for the model name
    label: str = ""  # how messages name its key: "an Anthropic API key"
    example_model: str = ""  # a model to offer where one is picked from a list (the web room's form)

    @property
    def install(self) -> str:
        """The exact command that installs this provider's package."""
        return install_command(self.extra) if self.extra else f"pip install {self.pip}"

    @property
    def installed(self) -> bool:
        return not self.package or importlib.util.find_spec(self.package.split(".")[0]) is not None

    def key(self, environ: Any = None) -> str:
        """The key from the first of ``key_variables`` that is set ('' when none is)."""
        env = os.environ if environ is None else environ
        for variable in self.key_variables:
            value = str(env.get(variable, "")).strip()
            if value:
                return value
        return ""

    def module(self) -> ModuleType:
        """The family module that builds and judges this provider's models."""
        return importlib.import_module(f"{__name__}.{self.family}")


def _langchain(name: str, package: str, chat_class: str, pip: str, keys: tuple[str, ...], *, system: str,
               prices: str | None, sdk: tuple[str, ...], extra: str | None = None, family: str = "generic",
               required: bool = True, secrets: tuple[str, ...] = (), base_url: str | None = None,
               model_field: str = "model", label: str = "", example: str = "") -> Provider:
    return Provider(name=name, family=family, package=package, chat_class=chat_class, pip=pip, extra=extra,
                    key_variables=keys, key_required=required, secret_variables=secrets, base_url_variable=base_url,
                    system=system, prices_id=prices, sdk_modules=(package.split(".")[0], *sdk),
                    model_field=model_field, label=label or f"a key for {name}", example_model=example)


_AWS_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK")
_HTTP = ("httpx", "httpx2", "httpcore", "requests", "urllib3", "aiohttp")

# The providers ``init_chat_model`` knows, with their packages, keys and names for tracing
# (OpenTelemetry's gen_ai.provider.name values where it has one).
PROVIDERS: dict[str, Provider] = {p.name: p for p in (
    _langchain("anthropic", "langchain_anthropic", "ChatAnthropic", "langchain-anthropic", ("ANTHROPIC_API_KEY",),
               family="anthropic", system="anthropic", prices="anthropic", sdk=("anthropic", *_HTTP),
               base_url="ANTHROPIC_BASE_URL", label="an Anthropic API key", example=DEFAULT_MODEL),
    _langchain("openai", "langchain_openai", "ChatOpenAI", "langchain-openai", ("OPENAI_API_KEY",), extra="openai",
               family="openai", system="openai", prices="openai", sdk=("openai", *_HTTP),
               base_url="OPENAI_BASE_URL", label="an OpenAI API key", example="openai:gpt-4.1-mini"),
    _langchain("ollama", "langchain_ollama", "ChatOllama", "langchain-ollama", (), extra="ollama", family="ollama",
               required=False, system="ollama", prices=None, sdk=("ollama", *_HTTP), base_url="OLLAMA_HOST",
               example="ollama:qwen3:8b"),
    _langchain("azure_openai", "langchain_openai", "AzureChatOpenAI", "langchain-openai", ("AZURE_OPENAI_API_KEY",),
               extra="openai", family="openai", system="azure.ai.openai", prices="azure", sdk=("openai", *_HTTP),
               base_url="AZURE_OPENAI_ENDPOINT", model_field="azure_deployment"),
    _langchain("google_genai", "langchain_google_genai", "ChatGoogleGenerativeAI", "langchain-google-genai",
               ("GOOGLE_API_KEY", "GEMINI_API_KEY"), extra="google", system="gcp.gemini", prices="google",
               sdk=("google", *_HTTP)),
    _langchain("google_vertexai", "langchain_google_vertexai", "ChatVertexAI", "langchain-google-vertexai", (),
               required=False, system="gcp.vertex_ai", prices="google", sdk=("google", *_HTTP)),
    _langchain("google_anthropic_vertex", "langchain_google_vertexai.model_garden", "ChatAnthropicVertex",
               "langchain-google-vertexai", (), required=False, system="gcp.vertex_ai", prices="anthropic",
               sdk=("google", "anthropic", *_HTTP)),
    _langchain("bedrock_converse", "langchain_aws", "ChatBedrockConverse", "langchain-aws", ("AWS_ACCESS_KEY_ID",),
               extra="bedrock", required=False, secrets=_AWS_SECRETS, system="aws.bedrock", prices="aws",
               sdk=("botocore", "boto3", *_HTTP)),
    _langchain("bedrock", "langchain_aws", "ChatBedrock", "langchain-aws", ("AWS_ACCESS_KEY_ID",), extra="bedrock",
               required=False, secrets=_AWS_SECRETS, system="aws.bedrock", prices="aws",
               sdk=("botocore", "boto3", *_HTTP), model_field="model_id"),
    _langchain("anthropic_bedrock", "langchain_aws", "ChatAnthropicBedrock", "langchain-aws", ("AWS_ACCESS_KEY_ID",),
               extra="bedrock", required=False, secrets=_AWS_SECRETS, system="aws.bedrock", prices="aws",
               sdk=("botocore", "boto3", "anthropic", *_HTTP)),
    _langchain("mistralai", "langchain_mistralai", "ChatMistralAI", "langchain-mistralai", ("MISTRAL_API_KEY",),
               system="mistral_ai", prices="mistral", sdk=_HTTP),
    _langchain("groq", "langchain_groq", "ChatGroq", "langchain-groq", ("GROQ_API_KEY",), system="groq",
               prices="groq", sdk=("groq", *_HTTP)),
    _langchain("cohere", "langchain_cohere", "ChatCohere", "langchain-cohere", ("COHERE_API_KEY", "CO_API_KEY"),
               system="cohere", prices="cohere", sdk=("cohere", *_HTTP)),
    _langchain("deepseek", "langchain_deepseek", "ChatDeepSeek", "langchain-deepseek", ("DEEPSEEK_API_KEY",),
               system="deepseek", prices="deepseek", sdk=("openai", *_HTTP)),
    _langchain("fireworks", "langchain_fireworks", "ChatFireworks", "langchain-fireworks", ("FIREWORKS_API_KEY",),
               system="_OTHER", prices="fireworks", sdk=("fireworks", "openai", *_HTTP)),
    _langchain("together", "langchain_together", "ChatTogether", "langchain-together", ("TOGETHER_API_KEY",),
               system="_OTHER", prices="together", sdk=("together", "openai", *_HTTP)),
    _langchain("xai", "langchain_xai", "ChatXAI", "langchain-xai", ("XAI_API_KEY",), system="x_ai", prices="x-ai",
               sdk=("openai", *_HTTP)),
    _langchain("perplexity", "langchain_perplexity", "ChatPerplexity", "langchain-perplexity", ("PPLX_API_KEY",),
               system="perplexity", prices="perplexity", sdk=("openai", "perplexity", *_HTTP)),
    _langchain("openrouter", "langchain_openrouter", "ChatOpenRouter", "langchain-openrouter",
               ("OPENROUTER_API_KEY",), system="_OTHER", prices="openrouter", sdk=("openai", "openrouter", *_HTTP)),
    _langchain("nvidia", "langchain_nvidia_ai_endpoints", "ChatNVIDIA", "langchain-nvidia-ai-endpoints",
               ("NVIDIA_API_KEY",), system="_OTHER", prices=None, sdk=_HTTP),
    _langchain("upstage", "langchain_upstage", "ChatUpstage", "langchain-upstage", ("UPSTAGE_API_KEY",),
               system="_OTHER", prices=None, sdk=("openai", *_HTTP)),
    _langchain("ibm", "langchain_ibm", "ChatWatsonx", "langchain-ibm", ("WATSONX_APIKEY",), system="ibm.watsonx.ai",
               prices=None, sdk=("ibm_watsonx_ai", *_HTTP), model_field="model_id"),
    _langchain("azure_ai", "langchain_azure_ai.chat_models", "AzureAIChatCompletionsModel", "langchain-azure-ai",
               ("AZURE_AI_CREDENTIAL",), system="azure.ai.inference", prices="azure",
               sdk=("azure", *_HTTP), model_field="model_name"),
    # Cabal's own stand-ins for a model: they cost nothing and need no key.
    Provider("scripted", "local"),
    Provider("py", "local"),
    Provider("simulated", "local"),
    Provider("replay", "local"),  # a recorded mission's calls (llm/replay.py)
)}

# Bare names a user may type without their provider, and the provider they belong to
# (what init_chat_model infers from the same prefixes).
_INFERRED = (("gpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"), ("chatgpt", "openai"),
             ("gemini", "google_genai"), ("mistral", "mistralai"), ("codestral", "mistralai"),
             ("command", "cohere"), ("deepseek", "deepseek"), ("grok", "xai"), ("sonar", "perplexity"),
             ("amazon.", "bedrock_converse"), ("llama", "ollama"), ("qwen", "ollama"), ("gemma", "ollama"),
             ("phi", "ollama"))
SIMULATED_FACTORY = "cabal.rounds.simulated:team"
SIMULATED = "simulated"  # the simulated team's spec, and its model's name in usage, prices and pages


def provider(name: str) -> Provider:
    """The provider called ``name``; ``KeyError`` when there is none."""
    return PROVIDERS[name]


def model_providers() -> list[Provider]:
    """The providers of real models (not Cabal's own stand-ins), in registry order."""
    return [p for p in PROVIDERS.values() if p.family != "local"]


@dataclass(frozen=True)
class Readiness:
    """Whether ``provider``'s models can be used here now, and if not, the one thing to do."""

    provider: Provider
    ready: bool
    todo: str = ""  # "pip install 'cabal-agents[openai]'", "set OPENAI_API_KEY", "start Ollama: nothing answers at ..."


def readiness(provider: Provider, environ: Any = None) -> Readiness:
    """Whether ``provider`` is ready: its package installed, its key set (when it has a key
    variable), and, for a local server (Ollama), the server answering a short probe. The one
    answer ``cabal models`` prints and the web room's form offers."""
    env = os.environ if environ is None else environ
    if not provider.installed:
        return Readiness(provider, False, provider.install)
    if provider.key_variables and not provider.key(env):
        return Readiness(provider, False, f"set {provider.key_variables[0]}")
    unready = getattr(provider.module(), "unready", None) if provider.family != "local" else None
    reason = unready(provider, env) if unready is not None else None
    return Readiness(provider, reason is None, reason or "")


def ready_providers(environ: Any = None) -> list[Provider]:
    """The providers of real models that are ready here, in registry order."""
    return [p for p in model_providers() if readiness(p, environ).ready]


def closest_providers(name: str) -> list[str]:
    """Every provider's name, the ones closest to ``name`` first."""
    names = list(PROVIDERS)
    close = difflib.get_close_matches(name, names, n=len(names), cutoff=0.4)
    return close + [n for n in names if n not in close]


def inferred_provider(name: str) -> str | None:
    """The provider a bare model name most likely belongs to (``gpt-4o`` -> openai), or None."""
    lowered = name.lower()
    return next((p for prefix, p in _INFERRED if lowered.startswith(prefix)), None)


def secret_values(environ: Any = None) -> list[str]:
    """The values of every provider's key and credential variables that are set, longest first."""
    env = os.environ if environ is None else environ
    names = {v for p in PROVIDERS.values() for v in (*p.key_variables, *p.secret_variables)}
    values = {str(env.get(name, "")).strip() for name in names}
    return sorted((v for v in values if len(v) >= 4), key=len, reverse=True)  # a shorter value is no secret


def provider_of(model: Any) -> Provider | None:
    """The provider whose chat class ``model`` is (through bindings), or None for another class."""
    while hasattr(model, "bound"):
        model = model.bound
    module = type(model).__module__
    top = module.split(".")[0]
    if top == "cabal":
        return PROVIDERS["py"]
    matches = [p for p in PROVIDERS.values() if p.package and p.package.split(".")[0] == top]
    named = [p for p in matches if p.chat_class == type(model).__name__]
    found = named or matches
    return found[0] if found else None




_built: dict[str, str] = {}  # a model's name as its provider reports it -> the provider it was built for


def record_built(model_name: str, built_for: Provider) -> None:
    """``make_model`` built a model that reports ``model_name`` for ``built_for``: usage,
    prices and traces, which know a model only by that name, can tell its provider."""
    _built[model_name] = built_for.name


def provider_named(model_name: str) -> Provider | None:
    """The provider of a model known by the name it reports (None when nothing says)."""
    if model_name in _built:
        return PROVIDERS[_built[model_name]]
    if model_name.startswith("claude"):
        return PROVIDERS["anthropic"]
    if model_name.startswith("cabal-"):
        return PROVIDERS["py"]
    return None
