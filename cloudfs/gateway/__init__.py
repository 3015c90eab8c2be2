"""``cloudfs gateway s3``: volumes of the tree service served as S3 buckets.

Spark's s3a, boto3, the AWS CLI and pyarrow reach CloudFS volumes through it
without FUSE, reading through the node's block cache and writing into the
namespace and the UFS as a mount does (``cloudfs.client``).
"""
