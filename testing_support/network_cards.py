"""EC2's network cards in the emulator, which moto does not model.

EC2 numbers an instance's devices per network card: AttachNetworkInterface's NetworkCardIndex
picks the card (default 0) and DeviceIndex the slot on it (EC2 API reference,
AttachNetworkInterface), and IMDS gives each ENI's device-number within its card and, on
multi-card instance types only, its network-card (amazonlinux/amazon-ec2-net-utils#104; 404
elsewhere). moto 5.2 keys an instance's ENIs by device index alone (models/instances.py,
attach_eni) and always answers card 0, so the emulator hands moto one number per (card, index),
card x CARD_STRIDE + index, and splits it again for IMDS and the attach answer (moto's own
answers, such as DescribeNetworkInterfaces', show the combined number).
"""

from __future__ import annotations

import re

from config import instance_types

#: More device indexes than any card takes (config/instance_types.py: at most 24).
CARD_STRIDE = 100


def moto_attach_params(params: dict[str, str]) -> tuple[dict[str, str], int]:
    """An AttachNetworkInterface's parameters as moto gets them, and the card it names."""
    card = int(params.get("NetworkCardIndex", "0"))
    forwarded = {key: value for key, value in params.items() if key != "NetworkCardIndex"}
    forwarded["DeviceIndex"] = str(card * CARD_STRIDE + int(params["DeviceIndex"]))
    return forwarded, card


def attach_answer(payload: bytes, card: int) -> bytes:
    """moto's answer with the card the attachment went to."""
    return re.sub(
        rb"<networkCardIndex>\d+</networkCardIndex>",
        f"<networkCardIndex>{card}</networkCardIndex>".encode(),
        payload,
    )


def device_number(moto_device_index: int) -> str:
    """IMDS's device-number: the index within the card."""
    return str(moto_device_index % CARD_STRIDE)


def network_card(moto_device_index: int, instance_type: str) -> str | None:
    """IMDS's network-card, on instance types with several cards only (else None: 404)."""
    if network_cards_of(instance_type) < 2:
        return None
    return str(moto_device_index // CARD_STRIDE)


def network_cards_of(instance_type: str) -> int:
    """How many network cards a NodePool instance type has (config/instance_types.py)."""
    family = instance_types.family_of(instance_type)
    return max(
        (
            len(cards)
            for cpus, cards in instance_types.MULTI_CARD_SIZES.get(family, {}).items()
            if instance_types.size_name(family, cpus) == instance_type
        ),
        default=1,
    )
