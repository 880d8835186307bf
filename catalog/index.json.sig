{
  "format": "fwman-signature",
  "version": 1,
  "algorithm": "ed25519",
  "key_id": "23cb724582f7654c",
  "signature": "aFYoGE8u39HSEt25ZGT1230kUIuQfNKi/5ts8iiJYVI0ivKVv18rQ6MQ3+kaIaLMYWDL+wX0PoCWNh6wy9ZCBg=="
}
