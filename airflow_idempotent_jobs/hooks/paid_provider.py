"""`PaidProviderHook`: the small base class an adapter author subclasses to pay through any API.

A subclass reads its Connection and builds a `PaidProvider` (submit / status / find /
capabilities); `PaidGenerationOperator` and `PaidJobTrigger` do the rest (the ledger, the budget,
polling, deferral). Airflow's convention builds a hook from its connection id alone::

    hook = cls(**{cls.conn_name_attr: conn_id})

so that is the one constructor call the operator and the trigger make. Which hook: see
`resolve_provider_hook` (``provider_hook="package.module.Class"``, else ours for a vendor's own
connection type (`VENDOR_HOOKS`), else the hook Airflow has registered for the connection's type).
"""

from __future__ import annotations

import abc
import asyncio
import importlib
from typing import TYPE_CHECKING, Any, Final

from airflow.sdk import BaseHook

from ..airflow_compat import hook_class_name

if TYPE_CHECKING:
    from ..paid.provider import PaidProvider

__all__ = [
    "VENDOR_HOOKS",
    "PaidProviderHook",
    "build_provider",
    "construct_hook",
    "hook_class_path",
    "provider_hook_class",
    "resolve_provider_hook",
]

_WHAT = "provider hook"

#: Connection types of the vendors' own Airflow providers (apache-airflow-providers-openai,
#: -anthropic, -amazon) and the hook of ours that pays through each. Those providers register hooks
#: of their own for these types, which cannot build a paid provider; a team's existing
#: ``openai_default`` or ``aws_default`` must work as it is, so for these types ours wins over
#: whatever Airflow has registered.
VENDOR_HOOKS: Final = {
    "openai": "airflow_idempotent_jobs.vendors.openai.hook.OpenAIBatchHook",
    "anthropic": "airflow_idempotent_jobs.vendors.anthropic.hook.AnthropicBatchHook",
    "aws": "airflow_idempotent_jobs.vendors.bedrock.hook.BedrockHook",
}
#: The package extra that installs each vendor's SDK, where it is not named as the connection type.
_EXTRAS: Final = {"aws": "bedrock"}


class PaidProviderHook(BaseHook, abc.ABC):
    """Builds a `PaidProvider` from the Connection ``provider_conn_id`` names; read on first use only.

    Implement `get_provider`. Override `aget_provider` only if building the provider can be
    done on the event loop without blocking it (the default runs `get_provider` in a thread).
    A subclass may rename the connection-id parameter by setting ``conn_name_attr``; the id is
    always also available as ``self.provider_conn_id``.
    """

    conn_name_attr = "provider_conn_id"
    default_conn_name = "paid_provider_default"
    hook_name = "Paid provider"

    def __init__(self, provider_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__()
        name = self.conn_name_attr
        if name != "provider_conn_id" and name in kwargs:
            if provider_conn_id is not None:
                raise TypeError(f"{type(self).__name__}: give the connection id once ({name}=)")
            provider_conn_id = kwargs.pop(name)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        conn_id = self.default_conn_name if provider_conn_id is None else provider_conn_id
        self.provider_conn_id: str = conn_id
        setattr(self, name, conn_id)

    @abc.abstractmethod
    def get_provider(self) -> PaidProvider:
        """Read ``self.provider_conn_id``'s Connection (``self.get_connection``) and build the provider.

        Raise `InvalidConfiguration` (from ``airflow_idempotent_jobs.errors``) for a setting that
        cannot work: the task then fails without retry, before anything is sent. The provider's
        ``redact(text)`` (optional) should remove its credential from any text; register the
        credential with Airflow's secrets masker (``airflow.sdk.log.mask_secret``) if it is not
        the Connection's password (Airflow masks that one already).
        """

    async def aget_provider(self) -> PaidProvider:
        """`get_provider` for the triggerer, never blocking its event loop.

        The default runs `get_provider` in a worker thread: there Airflow's synchronous
        Connection lookup is safe (it bridges to the triggerer's loop), whatever the hook's
        client does while it is built. Override with ``await self.aget_connection(...)`` if the
        build is quick and needs no other blocking call.
        """
        return await asyncio.to_thread(self.get_provider)

    def get_conn(self) -> PaidProvider:
        return self.get_provider()

    def test_connection(self) -> tuple[bool, str]:
        """Builds the provider (no job is created); a subclass can probe its API too."""
        try:
            provider = self.get_provider()
        except Exception as exc:  # report any failure to the UI rather than raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, f"provider built: {type(provider).__name__}"


def hook_class_path(hook: type[PaidProviderHook] | PaidProviderHook) -> str:
    """``package.module.Class``: what the trigger carries to re-create the hook in the triggerer."""
    cls = hook if isinstance(hook, type) else type(hook)
    return f"{cls.__module__}.{cls.__qualname__}"


def provider_hook_class(path: str) -> type[PaidProviderHook]:
    """The `PaidProviderHook` subclass ``path`` names; else `InvalidConfiguration` in one line."""
    from ..errors import InvalidConfiguration

    module_name, _, name = path.rpartition(".") if isinstance(path, str) else ("", "", "")
    if not module_name or not name or not all(part.isidentifier() for part in path.split(".")):
        raise InvalidConfiguration(_WHAT, "provider_hook", f"{path!r:.200} is not a 'package.module.Class' path")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except ImportError as exc:
        raise InvalidConfiguration(_WHAT, "provider_hook", f"cannot import {path}: {_one_line(exc)}") from None
    except AttributeError:
        raise InvalidConfiguration(_WHAT, "provider_hook", f"module {module_name} has no {name}") from None
    if not (isinstance(found, type) and issubclass(found, PaidProviderHook)):
        raise InvalidConfiguration(
            _WHAT, "provider_hook", f"{path} is not a subclass of {hook_class_path(PaidProviderHook)}"
        )
    if getattr(found, "__abstractmethods__", None):
        missing = ", ".join(sorted(found.__abstractmethods__))
        raise InvalidConfiguration(_WHAT, "provider_hook", f"{path} does not implement {missing}")
    return found


def construct_hook(cls: type[PaidProviderHook], conn_id: str) -> PaidProviderHook:
    """``cls(**{cls.conn_name_attr: conn_id})``; a constructor that refuses it is `InvalidConfiguration`."""
    from ..errors import InvalidConfiguration

    try:
        return cls(**{cls.conn_name_attr: conn_id})
    except TypeError as exc:
        raise InvalidConfiguration(
            _WHAT, "provider_hook", f"{hook_class_path(cls)}({cls.conn_name_attr}=...) failed: {_one_line(exc)}"
        ) from None


def resolve_provider_hook(conn_id: str, provider_hook: str | None = None) -> PaidProviderHook:
    """The hook that builds the provider for ``conn_id``.

    ``provider_hook`` (a class path) wins, and reads nothing. Otherwise the Connection is read:
    a vendor's type (``openai``, ``anthropic``, ``aws``: `VENDOR_HOOKS`) takes our hook for it, whatever
    hook Airflow has registered; any other type must be registered with Airflow (a provider
    package's ``connection-types``) by a `PaidProviderHook` subclass, as ``idempotent_jobs_http``
    is. Anything else is `InvalidConfiguration` (no retry): a connection of type ``http`` or
    ``generic`` names no such hook, so pass ``provider_hook=`` for it.
    """
    from ..errors import InvalidConfiguration

    if provider_hook is not None:
        return construct_hook(provider_hook_class(provider_hook), conn_id)
    conn_type = BaseHook.get_connection(conn_id).conn_type
    vendor_hook = VENDOR_HOOKS.get(conn_type or "")
    if vendor_hook is not None:
        try:
            return construct_hook(provider_hook_class(vendor_hook), conn_id)
        except InvalidConfiguration as exc:  # the vendor's SDK is not installed: say which extra
            raise InvalidConfiguration(
                _WHAT,
                "provider_hook",
                f"connection {conn_id!r} has type {conn_type!r}: {exc.reason} "
                f"(install airflow-idempotent-jobs[{_EXTRAS.get(conn_type or '', conn_type)}])",
            ) from None
    class_name = hook_class_name(conn_type or "")
    if not class_name:
        raise InvalidConfiguration(
            _WHAT,
            "provider_hook",
            f"connection {conn_id!r} has type {conn_type!r}, for which no paid-provider hook is registered: "
            "pass provider_hook='package.module.Class' (a PaidProviderHook subclass)",
        )
    try:
        cls = provider_hook_class(class_name)
    except InvalidConfiguration as exc:
        raise InvalidConfiguration(
            _WHAT,
            "provider_hook",
            f"connection {conn_id!r} has type {conn_type!r}, whose hook cannot build a paid provider "
            f"({exc.reason}): pass provider_hook='package.module.Class' (a PaidProviderHook subclass)",
        ) from None
    return construct_hook(cls, conn_id)


def build_provider(hook: PaidProviderHook) -> PaidProvider:
    """``hook.get_provider()``, held to the port: anything that cannot be used is `InvalidConfiguration`.

    Our errors keep their own policy and a missing Connection stays Airflow's (retryable, as for
    every hook); any other exception out of ``get_provider`` (a broken SDK, a bug) and a result
    that is not a `PaidProvider` fail the task without retry, before anything is sent.
    """
    try:
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:  # Airflow < 3.2
        from airflow.exceptions import AirflowNotFoundException  # type: ignore[attr-defined,no-redef,unused-ignore]

    from ..errors import IdempotentJobsError, InvalidConfiguration
    from ..paid.provider import PaidProvider

    what = hook_class_path(hook)
    try:
        provider = hook.get_provider()
    except (IdempotentJobsError, AirflowNotFoundException):
        raise
    except Exception as exc:
        raise InvalidConfiguration(
            _WHAT, "provider_hook", f"{what}.get_provider() failed: {type(exc).__name__}: {_one_line(exc)}"
        ) from None
    if not isinstance(provider, PaidProvider):
        raise InvalidConfiguration(
            _WHAT,
            "provider_hook",
            f"{what}.get_provider() returned {type(provider).__name__}, which lacks the PaidProvider members "
            "(capabilities, submit, status, find)",
        )
    return provider


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300] + ("..." if len(text) > 300 else "")
