module karpenterbox/v1_13_1

go 1.26.6

require github.com/aws/karpenter-provider-aws v1.13.1
