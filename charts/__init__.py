"""cdk8s charts deployed into the EKS cluster: Multus, Whereabouts, network attachments,
cleartaints, the Karpenter NodePool/EC2NodeClass and optional sample workloads.

Each chart takes explicit, already-derived props (a frozen dataclass in its module); deriving
them from the app configuration is the cluster stack's job.
"""
