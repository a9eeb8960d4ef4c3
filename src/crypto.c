/* placeholder */ typedef int placeholder_crypto;
